package state

import (
	"encoding/json"
	"testing"
)

// The heads decode a part of the stored records: their fields must be
// named as the records' are, or a head reads zeros (an alive host that
// looks dead, a model of no type) without an error.
func TestHeadsDecodeTheirRecords(t *testing.T) {
	md := modelDoc{UUID: "u", Name: "n", Type: ModelTypeCAAS, Life: Dying, Config: map[string]any{"k": "v"}}
	raw, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	var mh modelHead
	if err := json.Unmarshal(raw, &mh); err != nil {
		t.Fatal(err)
	}
	if want := (modelHead{UUID: "u", Name: "n", Type: ModelTypeCAAS, Life: Dying}); mh != want {
		t.Errorf("model head %+v, want %+v", mh, want)
	}
	// Through the model cache (decodeRecord): the same head, first read,
	// cached and from the cache; and the head of a record whose config is
	// not a map, which the whole record cannot hold.
	for i := range 3 {
		var ch modelHead
		if err := decodeRecord("model/head-test", raw, &ch); err != nil || ch != mh {
			t.Errorf("read %d: decodeRecord head %+v, %v; want %+v", i, ch, err, mh)
		}
	}
	bad := []byte(`{"uuid":"u","name":"n","type":"caas","life":"dying","config":5}`)
	var bh modelHead
	if err := decodeRecord("model/head-test-bad", bad, &bh); err != nil || bh != mh {
		t.Errorf("head of a record with a bad config: %+v, %v", bh, err)
	}
	var bd modelDoc
	if err := decodeRecord("model/head-test-bad", bad, &bd); err == nil {
		t.Errorf("whole record with a bad config decoded: %+v", bd)
	}

	d := machineDoc{Machine: Machine{ID: "3", Life: Dying, SupportedContainers: []string{"lxd"}, SupportedContainersKnown: true}}
	raw, err = json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var h MachineHost
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	if h.ID != "3" || h.Life != Dying || !h.SupportedContainersKnown || len(h.SupportedContainers) != 1 || h.SupportedContainers[0] != "lxd" {
		t.Errorf("machine head %+v of %s", h, raw)
	}
}
