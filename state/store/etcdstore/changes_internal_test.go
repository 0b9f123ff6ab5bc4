package etcdstore

import (
	"slices"
	"testing"

	"github.com/provisiond/provisiond/watcher"
)

// FuzzDecodeGroup: a group feed value of any bytes decodes or is refused,
// never a panic; what encodeGroup writes decodes to what it was given.
func FuzzDecodeGroup(f *testing.F) {
	cs := encodeChanges([]watcher.Change{{Kind: "machine", Model: "m", ID: "0", Fields: []string{"status"}}})
	good := encodeGroup([]*proposal{{witness: "machine/m/0", cs: cs}, {witness: "unit/m/a", cs: encodeChanges(nil)}})
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte{groupVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{groupVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := decodeGroup(b)
		if err != nil {
			return
		}
		for _, m := range ms {
			_, _ = decodeChanges(m.cs)
		}
	})
}

func TestEncodeGroupRoundTrip(t *testing.T) {
	cs := encodeChanges([]watcher.Change{{Kind: "machine", Model: "m", ID: "0", Fields: []string{"status"}}})
	ms, err := decodeGroup(encodeGroup([]*proposal{{witness: "machine/m/0", cs: cs}, {witness: "unit/m/a", cs: cs}}))
	if err != nil || len(ms) != 2 || ms[0].witness != "machine/m/0" || ms[1].witness != "unit/m/a" || !slices.Equal(ms[1].cs, cs) {
		t.Fatalf("decoded %+v, %v", ms, err)
	}
	for _, bad := range [][]byte{nil, {changesVersion}, {groupVersion}, {groupVersion, 1, 0, 0}, {groupVersion, 1, 1, 'k'}} {
		if _, err := decodeGroup(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
