package charm

import (
	"encoding/json"
	"testing"
)

func TestParseAssumes(t *testing.T) {
	m, err := ParseMeta([]byte(`name: a
assumes:
  - k8s-api
  - juju>=3.1
  - any-of:
      - juju <  4
      - all-of:
          - lxd
          - juju >= 2.9.42
`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(m.Assumes)
	want := `["k8s-api","juju \u003e= 3.1",{"any-of":["juju \u003c 4",{"all-of":["lxd","juju \u003e= 2.9.42"]}]}]`
	if string(got) != want {
		t.Errorf("assumes = %s\nwant      %s", got, want)
	}
	for _, c := range []struct{ yaml, err string }{
		{"name: a\nassumes: k8s-api\n", `metadata.yaml line 2: malformed "assumes" block; expected an expression list`},
		{"name: a\nassumes:\n  - Bad_Feature\n", `metadata.yaml line 3: assumes expression 1: malformed feature expression "Bad_Feature"`},
		{"name: a\nassumes:\n  - juju >= three\n", `metadata.yaml line 3: assumes expression 1: malformed feature expression "juju >= three"`},
		{"name: a\nassumes:\n  - k8s-api\n  - one-of: [a]\n", `metadata.yaml line 4: assumes expression 2: malformed composite expression; expected an "any-of" or "all-of" block`},
		{"name: a\nassumes:\n  - any-of: lxd\n", `metadata.yaml line 3: assumes expression 1: malformed "any-of" expression; expected a list of sub-expressions`},
		{"name: a\nassumes:\n  - any-of: [lxd, \"x y\"]\n", `metadata.yaml line 3: assumes expression 1: "any-of" expression 2: malformed feature expression "x y"`},
	} {
		if _, err := ParseMeta([]byte(c.yaml)); err == nil || err.Error() != c.err {
			t.Errorf("%q: err = %v\nwant %s", c.yaml, err, c.err)
		}
	}
}
