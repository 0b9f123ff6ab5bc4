package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

// nested returns a JSON object nested depth objects deep ({"a":{"a":...1}}).
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// The free-form values of a params value (an `any` anywhere in it) are
// each bounded in depth and size, wherever they sit: a map entry, a list
// element, an `any` field, through pointers; the error names the value's
// place and has code "not valid". A value at the bound passes.
func TestValueChecker(t *testing.T) {
	type item struct {
		Tag  string         `json:"tag"`
		Data map[string]any `json:"data"`
	}
	type args struct {
		Items   []item         `json:"items"`
		Default any            `json:"default"`
		Ptr     *item          `json:"ptr"`
		List    []any          `json:"list"`
		ByName  map[string]any `json:"by-name"`
		private any
	}
	check := valueChecker(reflect.TypeFor[args]())
	if check == nil {
		t.Fatal("no checker for a type with free-form values")
	}
	decode := func(s string) *args {
		t.Helper()
		var a args
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatal(err)
		}
		return &a
	}
	big := `"` + strings.Repeat("x", MaxValueBytes) + `"`
	for _, tt := range []struct {
		name, params, place string // place "": passes
		why                 string
	}{
		{"shallow values", `{"items":[{"tag":"machine-0","data":{"transient":true,"n":1.5,"s":"x","l":[1,null]}}],"default":"v"}`, "", ""},
		{"data at the bound", `{"items":[{"data":{"k":` + nested(MaxValueDepth) + `}}]}`, "", ""},
		{"data one over", `{"items":[{},{"data":{"k":` + nested(MaxValueDepth+1) + `}}]}`, `items[1].data["k"]`, "nested deeper"},
		{"data deep in a list", `{"items":[{"data":{"k":[` + nested(MaxValueDepth) + `]}}]}`, `items[0].data["k"]`, "nested deeper"},
		{"an any field", `{"default":` + nested(MaxValueDepth+1) + `}`, "default", "nested deeper"},
		{"through a pointer", `{"ptr":{"data":{"k":` + nested(MaxValueDepth+1) + `}}}`, `ptr.data["k"]`, "nested deeper"},
		{"a list element", `{"list":[1,` + nested(MaxValueDepth+1) + `]}`, "list[1]", "nested deeper"},
		{"the issue's 9,995 levels", `{"items":[{"data":{"k":` + nested(9995) + `}}]}`, `items[0].data["k"]`, "nested deeper"},
		{"a large string", `{"by-name":{"k":` + big + `}}`, `by-name["k"]`, "over 262144 bytes"},
		{"a large list", `{"list":[[` + strings.Repeat(`"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",`, MaxValueBytes/32) + `"a"]]}`, "list[0]", "over 262144 bytes"},
		{"many keys", `{"default":{` + manyKeys(MaxValueBytes/8) + `}}`, "default", "over 262144 bytes"},
		{"a long key is cut", `{"by-name":{"` + strings.Repeat("k", 100) + `":` + nested(MaxValueDepth+1) + `}}`, `by-name["` + strings.Repeat("k", 64) + `"...]`, "nested deeper"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := check(decode(tt.params))
			if tt.place == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *params.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v; want a params.Error", err)
			}
			if pe.Code != params.CodeNotValid || !strings.HasPrefix(pe.Message, tt.place+": ") || !strings.Contains(pe.Message, tt.why) {
				t.Errorf("err = %q (%s); want %q: ...%s... (not valid)", pe.Message, pe.Code, tt.place, tt.why)
			}
		})
	}
	// Unexported fields are not the wire's: not walked.
	var deep any
	if err := json.Unmarshal([]byte(nested(MaxValueDepth+1)), &deep); err != nil {
		t.Fatal(err)
	}
	if err := check(&args{private: deep}); err != nil {
		t.Errorf("an unexported field was checked: %v", err)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[params.Entities](), reflect.TypeFor[struct{ B []byte }](),
		reflect.TypeFor[struct{ S fmtStringer }]()} {
		if valueChecker(typ) != nil {
			t.Errorf("%v holds no free-form value but has a checker", typ)
		}
	}
}

type fmtStringer interface{ String() string }

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":1`, i)
	}
	return b.String()
}

// A recursive params type gets a checker that follows it.
func TestValueCheckerRecursive(t *testing.T) {
	type node struct {
		Value    any     `json:"value"`
		Children []*node `json:"children"`
	}
	check := valueChecker(reflect.TypeFor[node]())
	if check == nil {
		t.Fatal("no checker")
	}
	var n node
	if err := json.Unmarshal([]byte(`{"children":[{"children":[{"value":`+nested(MaxValueDepth+1)+`}]}]}`), &n); err != nil {
		t.Fatal(err)
	}
	if err := check(&n); err == nil || !strings.HasPrefix(err.Error(), "children[0].children[0].value: ") {
		t.Errorf("err = %v", err)
	}
}

// A check that passes allocates nothing: status data of a few flat keys,
// the usual SetStatus, costs only the walk.
func TestValueCheckerAllocs(t *testing.T) {
	check := valueChecker(reflect.TypeFor[params.SetStatus]())
	a := &params.SetStatus{Entities: []params.EntityStatusArgs{
		{Tag: "machine-0", Status: "running", Data: map[string]any{"transient": true, "reason": "x"}},
		{Tag: "machine-1", Status: "started"},
	}}
	if n := testing.AllocsPerRun(100, func() {
		if err := check(a); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per check; want 0", n)
	}
}
