package params_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

func TestSetStatusDecodeFast(t *testing.T) {
	checkFastCases(t, []fastCase{
		{`{"entities":[{"tag":"machine-0","status":"running","info":"","data":{}}]}`, true},
		{`{"entities":[{"tag":"machine-0","status":"running","info":"up","data":null}]}`, true},
		{`{"entities":[{"data":{"a":"b","c":true,"d":false,"e":null,"a":"again"},"info":"x","status":"error","tag":"machine-1/lxd/0"},{"tag":"machine-2"}]}`, true},
		{` { "entities" : [ ] } `, true},
		{"{\n\t\"entities\": [\r\n{ \"tag\" : \"x\" , \"data\" : { } }\n]\n}", true},
		{`{"entities":[{}]}`, true},
		{`{"entities":[{"tag":"machine-0","data":{"n":1}}]}`, false},
		{`{"entities":[{"tag":"machine-0","data":{"n":{"x":"y"}}}]}`, false},
		{`{"entities":[{"tag":"machine-0","data":{"n":["x"]}}]}`, false},
		{`{"entities":[{"tag":"machine-0","data":"x"}]}`, false},
		{`{"entities":[{"tag":"machine-0","data":{"n":tru}}]}`, false},
		{`{"entities":[{"tag":"machine-0","data":{"n":nullx}}]}`, false},
		{`{"entities":[{"Tag":"machine-0"}]}`, false},
		{`{"entities":[{"tag":"machine-0","tag":"machine-1"}]}`, false},
		{`{"entities":[{"tag":"machine-0","life":"alive"}]}`, false},
		{`{"entities":[{"tag":"machine-0","info":"a \"quote\""}]}`, false},
		{`{"entities":[{"tag":"machine-0","info":"é"}]}`, false},
		{`{"entities":[{"tag":"machine-0","status":1}]}`, false},
		{`{"entities":[{"tag":"machine-0"},]}`, false},
		{`{"entities":[{"tag":"machine-0",}]}`, false},
		{`{"entities":[{"tag":"machine-0","data":{"a":"b",}}]}`, false},
		{`{"entities":null}`, false},
		{`{"entities":[]} x`, false},
		{`{"entities":[],"entities":[]}`, false},
		{`{"Entities":[]}`, false},
		{`{}`, false},
		{`null`, false},
		{`{"entities":[{"tag":"machine-0","data":{`, false},
	}, checkSameSetStatus, func(s params.SetStatus) bool { return s.Entities != nil })
}

// TestSetStatusDecodeFastAgreesWithJSON builds many near-misses of the
// form DecodeFast takes and checks that whatever it accepts, encoding/json
// decodes to the same value.
func TestSetStatusDecodeFastAgreesWithJSON(t *testing.T) {
	g := newNearMiss(5)
	good, space, rng := g.good, g.space, g.rng
	str := func() string {
		return good(4, `"machine-0"`, `""`, `"a b/c"`, `"running"`, "\"\x7f\"", `"x\"y"`, `"\u0041"`, `"é"`, "\"\x01\"", `null`, `1`, `"unterminated`, `[]`)
	}
	value := func() string {
		return good(5, `"v"`, `true`, `false`, `null`, `""`, `1`, `1.5`, `{}`, `[]`, `tru`, `nul`, `"\n"`, `{"a":"b"}`)
	}
	g.agree(t, func() string {
		var b strings.Builder
		b.WriteString(space() + "{" + space() + `"` + good(1, "entities", "Entities", "entitie") + `"` + space() + ":" + space())
		b.WriteString(good(1, "[", "null", "{", `"x"`) + space())
		for k := range rng.IntN(3) {
			if k > 0 {
				b.WriteString(space() + good(1, ",", ",,", ";") + space())
			}
			b.WriteString("{" + space())
			for m := range rng.IntN(5) {
				if m > 0 {
					b.WriteString(space() + good(1, ",", ",,", ":") + space())
				}
				key := good(4, "tag", "status", "info", "data", "Tag", "life", "DATA")
				b.WriteString(`"` + key + `"` + space() + ":" + space())
				if key == "data" && rng.IntN(10) < 8 {
					if rng.IntN(5) == 0 {
						b.WriteString("null")
					} else {
						b.WriteString("{" + space())
						for d := range rng.IntN(4) {
							if d > 0 {
								b.WriteString(space() + good(1, ",", ",,") + space())
							}
							b.WriteString(good(3, `"a"`, `"b"`, `"c"`, `"é"`, `a`) + space() + ":" + space() + value())
						}
						b.WriteString(space() + good(1, "}", ",}", "]"))
					}
				} else {
					b.WriteString(str())
				}
			}
			b.WriteString(space() + good(1, "}", `, }`, "]") + space())
		}
		b.WriteString(good(1, "]", "", "}") + space() + good(1, "}", `, "x": 1}`, `, "entities": []}`, "]") + space() + good(1, "", "x", "{}"))
		return b.String()
	}, func(data []byte) bool {
		var s params.SetStatus
		ok := s.DecodeFast(data)
		if ok {
			checkSameSetStatus(t, data, s)
		}
		return ok
	})
}

// FuzzDecodeSetStatus: what DecodeFast accepts, encoding/json decodes to
// the same value.
func FuzzDecodeSetStatus(f *testing.F) {
	for _, s := range []string{
		`{"entities":[{"tag":"machine-0","status":"running","info":"","data":{}}]}`,
		`{"entities":[]}`,
		`{"entities":[{"data":{"a":"b","c":true,"d":null},"tag":"machine-1"},{"tag":"machine-2","data":null}]}`,
		`{"entities":[{"tag":"a","data":{"n":1}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s params.SetStatus
		if s.DecodeFast(data) {
			checkSameSetStatus(t, data, s)
		}
	})
}

func checkSameSetStatus(t *testing.T, data []byte, got params.SetStatus) {
	t.Helper()
	var want params.SetStatus
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("DecodeFast accepted %q, which encoding/json refuses: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) || (got.Entities == nil) != (want.Entities == nil) {
		t.Fatalf("DecodeFast(%q) = %#v, encoding/json %#v", data, got, want)
	}
	for i := range got.Entities {
		if (got.Entities[i].Data == nil) != (want.Entities[i].Data == nil) {
			t.Fatalf("DecodeFast(%q): entity %d's data nil %v, encoding/json's %v", data, i,
				got.Entities[i].Data == nil, want.Entities[i].Data == nil)
		}
	}
}

// BenchmarkDecodeSetStatus: one SetInstanceStatus's params as our client
// sends them, through DecodeFast and through encoding/json.
func BenchmarkDecodeSetStatus(b *testing.B) {
	data := []byte(`{"entities":[{"tag":"machine-12","status":"running","info":"instance i-12 running","data":{}}]}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s params.SetStatus
			if !s.DecodeFast(data) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s params.SetStatus
			if err := json.Unmarshal(data, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
