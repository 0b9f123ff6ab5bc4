package params_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

func TestEntitiesDecodeFast(t *testing.T) {
	for _, tt := range []struct {
		in   string
		fast bool
	}{
		{`{"entities":[{"tag":"machine-0"}]}`, true},
		{`{"entities":[{"tag":"machine-0"},{"tag":"machine-1/lxd/0"},{"tag":""}]}`, true},
		{` { "entities" : [ ] } `, true},
		{"{\n\t\"entities\": [\r\n{\"tag\": \"x\"}\n]\n}", true},
		{`{"Entities":[{"tag":"machine-0"}]}`, false},
		{`{"entities":[{"Tag":"machine-0"}]}`, false},
		{`{"entities":null}`, false},
		{`{"entities":[{"tag":"machine-0","x":1}]}`, false},
		{`{"entities":[{"tag":"m\u0061chine-0"}]}`, false},
		{`{"entities":[{"tag":1}]}`, false},
		{`{"entities":[{"tag":"machine-0"},]}`, false},
		{`{"entities":[]} x`, false},
		{`{"entities":[],"entities":[]}`, false},
		{`{}`, false},
		{`null`, false},
	} {
		var e params.Entities
		ok := e.DecodeFast([]byte(tt.in))
		if ok != tt.fast {
			t.Errorf("DecodeFast(%s) = %v, want %v", tt.in, ok, tt.fast)
		}
		if ok {
			checkSameEntities(t, []byte(tt.in), e)
		} else if e.Entities != nil {
			t.Errorf("DecodeFast(%s) refused but filled %v", tt.in, e)
		}
	}
}

// TestDecodeFastAgreesWithJSON builds many near-misses of the form
// DecodeFast takes and checks that whatever it accepts,
// encoding/json decodes to the same value.
func TestDecodeFastAgreesWithJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	good := func(n int, xs ...string) string { // mostly from the first n
		if rng.IntN(10) < 8 {
			return xs[rng.IntN(n)]
		}
		return pick(xs...)
	}
	space := func() string { return pick("", "", "", " ", "\n ", "\t", "\r\n", "\u00a0") }
	accepted := 0
	for range 100000 {
		var b strings.Builder
		b.WriteString(space() + "{" + space() + `"` + good(1, "entities", "Entities", "entitie", "ENTITIES") + `"` + space() + ":" + space())
		b.WriteString(good(1, "[", "null", "{", `"x"`) + space())
		for k := range rng.IntN(4) {
			if k > 0 {
				b.WriteString(space() + good(1, ",", ",,", ";") + space())
			}
			b.WriteString("{" + space() + `"` + good(1, "tag", "Tag", "TAG", "tags") + `"` + space() + ":" + space())
			b.WriteString(good(4, `"machine-0"`, `""`, `"a b/c"`, "\"\x7f\"", `"x\"y"`, `"\u0041"`, `"é"`, "\"\x01\"", `null`, `1`, `"unterminated`, `[]`))
			b.WriteString(space() + good(1, "}", `, "x": 1}`, `, "tag": "other"}`, "]") + space())
		}
		b.WriteString(good(1, "]", "", "}") + space() + good(1, "}", `, "x": 1}`, `, "entities": []}`, "]") + space() + good(1, "", "x", "{}"))
		data := []byte(b.String())
		if rng.IntN(10) == 0 {
			data = data[:rng.IntN(len(data)+1)]
		}
		var e params.Entities
		if e.DecodeFast(data) {
			accepted++
			checkSameEntities(t, data, e)
		}
	}
	t.Logf("%d of 100,000 took the fast path", accepted)
	if accepted < 1000 {
		t.Errorf("only %d took the fast path: the generator no longer exercises it", accepted)
	}
}

// FuzzDecodeEntities: what DecodeFast accepts, encoding/json
// decodes to the same value.
func FuzzDecodeEntities(f *testing.F) {
	for _, s := range []string{`{"entities":[{"tag":"machine-0"}]}`, `{"entities":[]}`, ` {"entities" : [ {"tag":"a"} , {"tag":"b"} ] } `, `{"entities":[{"tag":"a"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e params.Entities
		if e.DecodeFast(data) {
			checkSameEntities(t, data, e)
		}
	})
}

func checkSameEntities(t *testing.T, data []byte, got params.Entities) {
	t.Helper()
	var want params.Entities
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("DecodeFast accepted %q, which encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) || (got.Entities == nil) != (want.Entities == nil) {
		t.Fatalf("DecodeFast(%q) = %#v, encoding/json %#v", data, got, want)
	}
}
