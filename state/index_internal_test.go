package state

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// The values an index reads from the document being written are those it
// reads from the record once stored: otherwise an entry would be written
// under one value and looked for under another.
func TestIndexValuesAgree(t *testing.T) {
	t.Parallel()
	var docs []any
	for i, c := range []*CloudContainer{nil, {}, {ProviderID: "pod-1"}, {ProviderID: "a\x00b/c"}} {
		for _, machine := range []string{"", "0", "1/lxd/2"} {
			docs = append(docs, &unitDoc{Unit: Unit{Model: "m", Name: fmt.Sprintf("a/%d", i), MachineID: machine,
				CAASUnit: CAASUnit{Container: c}}})
		}
	}
	for _, name := range []string{"", "prod", "k8s-2"} {
		docs = append(docs, &modelDoc{UUID: "u", Name: name})
	}
	for _, d := range docs {
		kind := KindUnit
		if _, ok := d.(*modelDoc); ok {
			kind = KindModel
		}
		ix := indexes[kind]
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		fromRaw, err := ix.values("", raw)
		if err != nil {
			t.Fatal(err)
		}
		// A stored record's values come through the unit cache: twice, so
		// that the second read is the cache's entry.
		for range 2 {
			stored, err := ix.values(entityKey(kind, "m", string(raw)), raw)
			if err != nil || !slices.Equal(stored, fromRaw) {
				t.Errorf("%s: values %q (%v) of the stored record, %q decoded", raw, stored, err, fromRaw)
			}
		}
		fromDoc, ok := ix.valuesOf(d)
		if !ok || !slices.Equal(fromRaw, fromDoc) || len(fromRaw) != len(ix.indexes) {
			t.Errorf("%s: values %q from the record, %q (%v) from the document", raw, fromRaw, fromDoc, ok)
		}
	}
}
