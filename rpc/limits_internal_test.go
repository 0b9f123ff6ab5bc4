package rpc

import (
	"reflect"
	"testing"

	"github.com/provisiond/provisiond/rpc/params"
)

// itemCounter counts the items of a params value's lists, two levels deep,
// through structs and pointers; bytes are a value, not items; a type
// without lists has no counter.
func TestItemCounter(t *testing.T) {
	type inner struct {
		Tags  []string
		Data  []byte
		Deep  [][]string // a third level: counted as the second level's items only
		Child *struct{ More []int }
	}
	type outer struct {
		Entities []params.Entity
		Args     []inner
		One      inner
		private  []int
		Skipped  []int `json:"-"`
	}
	count := func(v any) int {
		t.Helper()
		c := itemCounter(reflect.TypeOf(v).Elem())
		if c == nil {
			return -1
		}
		return c(v)
	}
	if n := count(&params.Entities{Entities: make([]params.Entity, 7)}); n != 7 {
		t.Errorf("Entities: %d", n)
	}
	v := &outer{
		Entities: make([]params.Entity, 3),
		Args: []inner{
			{Tags: make([]string, 5), Data: make([]byte, 1000), Deep: [][]string{make([]string, 100)}},
			{Child: &struct{ More []int }{More: make([]int, 4)}},
		},
		One:     inner{Tags: make([]string, 2), Child: &struct{ More []int }{More: make([]int, 1)}},
		private: make([]int, 50),
		Skipped: make([]int, 50),
	}
	// 3 entities; 2 args + 5 tags + 1 deep list + 4 more; 2 tags + 1 more.
	if n, want := count(v), 3+2+5+1+4+2+1; n != want {
		t.Errorf("outer: %d items; want %d", n, want)
	}
	if c := itemCounter(reflect.TypeFor[params.Entity]()); c != nil {
		t.Errorf("a type without lists has a counter")
	}
	if c := itemCounter(reflect.TypeFor[struct{ B []byte }]()); c != nil {
		t.Errorf("a []byte field is counted")
	}
}
