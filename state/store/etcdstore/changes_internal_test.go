package etcdstore

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"

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

// A feed value written before the change-set codec moved to package store
// (a lone commit's, version 1, and a group's, version 2) decodes, and the
// same change sets are written as the same bytes: prefixes written then
// still open and follow.
func TestFeedValueGolden(t *testing.T) {
	one := []watcher.Change{{Kind: "machine", Model: "deadbeef-0bad-400d-8000-4b1d0d000003", ID: "0/lxd/1", Parent: "0",
		Fields: []string{"status", "life", "dead"}}}
	two := []watcher.Change{{Kind: "user", ID: "admin", Fields: []string{"created"}}, {Kind: "model", Model: "m", ID: "m"},
		{Kind: "unit", Model: "m", ID: "db/0", Fields: []string{"", "é\x00"}}}
	const (
		oneHex   = "0101076d616368696e652464656164626565662d306261642d343030642d383030302d34623164306430303030303307302f6c78642f3101300306737461747573046c6966650464656164"
		twoHex   = "01030475736572000561646d696e00010763726561746564056d6f64656c016d016d000004756e6974016d0464622f3000020003c3a900"
		groupHex = "02020b6d616368696e652f6d2f304b" + oneHex + "0b756e69742f6d2f64622f3037" + twoHex
	)
	for _, c := range []struct {
		hex     string
		changes []watcher.Change
	}{{"0100", nil}, {oneHex, one}, {twoHex, two}} {
		old, _ := hex.DecodeString(c.hex)
		got, err := decodeChanges(old)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.changes) || len(got) != len(c.changes) {
			t.Errorf("decodeChanges(%s) = %+v, %v", c.hex, got, err)
		}
		if b := encodeChanges(c.changes); !bytes.Equal(b, old) {
			t.Errorf("encodeChanges(%+v) = %x, written before as %s", c.changes, b, c.hex)
		}
	}
	old, _ := hex.DecodeString(groupHex)
	ms, err := decodeGroup(old)
	if err != nil || len(ms) != 2 || ms[0].witness != "machine/m/0" || ms[1].witness != "unit/m/db/0" {
		t.Fatalf("decodeGroup = %+v, %v", ms, err)
	}
	for i, want := range [][]watcher.Change{one, two} {
		if got, err := decodeChanges(ms[i].cs); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("member %d: %+v, %v", i, got, err)
		}
	}
	g := encodeGroup([]*proposal{{witness: "machine/m/0", cs: encodeChanges(one)}, {witness: "unit/m/db/0", cs: encodeChanges(two)}})
	if !bytes.Equal(g, old) {
		t.Errorf("encodeGroup = %x, written before as %s", g, groupHex)
	}
}

// TestFeedWithHistory: a version-3 feed value holds the change set, which
// decodeChanges reads as a version-1 one's, and the history record after
// it, which splitFeed returns as it was written.
func TestFeedWithHistory(t *testing.T) {
	one := []watcher.Change{{Kind: "machine", Model: "m", ID: "0", Fields: []string{"status"}}}
	hist := store.AppendWrite(store.AppendCommitHead(nil, time.Unix(1, 0), store.Origin{Who: "user-admin"}),
		"machine/m/0", []byte(`{"s":1}`), true, []byte(`{"s":2}`), true)
	b := encodeFeed(one, hist)
	if b[0] != historyVersion {
		t.Fatalf("version %d", b[0])
	}
	got, err := decodeChanges(b)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(one) {
		t.Errorf("decodeChanges = %+v, %v", got, err)
	}
	changes, h, err := splitFeed(b)
	if err != nil || !bytes.Equal(h, hist) || !bytes.Equal(changes, encodeChanges(one)[1:]) {
		t.Errorf("splitFeed = %x, %x, %v", changes, h, err)
	}
	if !bytes.Equal(encodeFeed(one, nil), encodeChanges(one)) {
		t.Error("a change set without history is not a version-1 value")
	}
	for i := range len(b) {
		_, _ = decodeChanges(b[:i]) // never panics
	}
}
