//go:build failpoints

package failpoint

import "testing"

func TestParse(t *testing.T) {
	ps, err := Parse("store/reply=5%crash; feed/apply=delay(20ms);store/commit=early")
	if err != nil {
		t.Fatal(err)
	}
	if p := ps["store/reply"]; p.percent != 5 || p.action != "crash" {
		t.Fatalf("store/reply: %+v", p)
	}
	if p := ps["feed/apply"]; p.action != "delay" || p.delay.String() != "20ms" {
		t.Fatalf("feed/apply: %+v", p)
	}
	for _, bad := range []string{"nope=crash", "store/reply", "store/reply=0%crash", "store/reply=explode", "feed/apply=delay(x)"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): no error", bad)
		}
	}
}
