package params_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

func TestEntitiesDecodeFast(t *testing.T) {
	checkFastCases(t, []fastCase{
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
	}, checkSameEntities, func(e params.Entities) bool { return e.Entities != nil })
}

// TestDecodeFastAgreesWithJSON builds many near-misses of the form
// DecodeFast takes and checks that whatever it accepts,
// encoding/json decodes to the same value.
func TestDecodeFastAgreesWithJSON(t *testing.T) {
	g := newNearMiss(3)
	good, space := g.good, g.space
	g.agree(t, func() string {
		var b strings.Builder
		b.WriteString(space() + "{" + space() + `"` + good(1, "entities", "Entities", "entitie", "ENTITIES") + `"` + space() + ":" + space())
		b.WriteString(good(1, "[", "null", "{", `"x"`) + space())
		for k := range g.rng.IntN(4) {
			if k > 0 {
				b.WriteString(space() + good(1, ",", ",,", ";") + space())
			}
			b.WriteString("{" + space() + `"` + good(1, "tag", "Tag", "TAG", "tags") + `"` + space() + ":" + space())
			b.WriteString(good(4, `"machine-0"`, `""`, `"a b/c"`, "\"\x7f\"", `"x\"y"`, `"\u0041"`, `"é"`, "\"\x01\"", `null`, `1`, `"unterminated`, `[]`))
			b.WriteString(space() + good(1, "}", `, "x": 1}`, `, "tag": "other"}`, "]") + space())
		}
		b.WriteString(good(1, "]", "", "}") + space() + good(1, "}", `, "x": 1}`, `, "entities": []}`, "]") + space() + good(1, "", "x", "{}"))
		return b.String()
	}, func(data []byte) bool {
		var e params.Entities
		ok := e.DecodeFast(data)
		if ok {
			checkSameEntities(t, data, e)
		}
		return ok
	})
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
