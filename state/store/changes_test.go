package store_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// GoldenChanges are change sets with the bytes the engines' own codecs
// wrote before they shared this one (bbolt stored exactly these bytes;
// etcd puts them after its version byte): data dirs and etcd prefixes
// written then must decode, and what is written now must be the same.
var goldenChanges = []struct {
	changes []watcher.Change
	hex     string
}{
	{nil, "00"},
	{[]watcher.Change{{Kind: "machine", Model: "deadbeef-0bad-400d-8000-4b1d0d000003", ID: "0/lxd/1", Parent: "0",
		Fields: []string{"status", "life", "dead"}}},
		"01076d616368696e652464656164626565662d306261642d343030642d383030302d34623164306430303030303307302f6c78642f3101300306737461747573046c6966650464656164"},
	{[]watcher.Change{{Kind: "user", ID: "admin", Fields: []string{"created"}}, {Kind: "model", Model: "m", ID: "m"},
		{Kind: "unit", Model: "m", ID: "db/0", Fields: []string{"", "é\x00"}}},
		"030475736572000561646d696e00010763726561746564056d6f64656c016d016d000004756e6974016d0464622f3000020003c3a900"},
}

func TestChangesGolden(t *testing.T) {
	for _, g := range goldenChanges {
		old, err := hex.DecodeString(g.hex)
		if err != nil {
			t.Fatal(err)
		}
		got, err := store.DecodeChanges(old)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(g.changes) || len(got) != len(g.changes) {
			t.Errorf("DecodeChanges(%s) = %+v, %v; want %+v", g.hex, got, err, g.changes)
		}
		b := store.AppendChanges(nil, g.changes)
		if !bytes.Equal(b, old) {
			t.Errorf("AppendChanges(%+v) = %x, written before as %s", g.changes, b, g.hex)
		}
		if len(b) > store.ChangesSize(g.changes) {
			t.Errorf("%+v: %d bytes, ChangesSize %d", g.changes, len(b), store.ChangesSize(g.changes))
		}
	}
}

// A change set reads back as it was written; cut or padded, or with a
// count beyond its bytes, it is ErrBadChanges, never a panic or a huge
// allocation.
func TestChangesRoundTrip(t *testing.T) {
	for _, changes := range [][]watcher.Change{
		{{Kind: "k", Model: strings.Repeat("x", 300), ID: "\x00\xff", Fields: []string{""}}},
		{{Kind: "unit", ID: "a/0"}, {Kind: "machine", ID: "1", Fields: slices.Repeat([]string{"f"}, 200)}},
	} {
		b := store.AppendChanges([]byte("prefix"), changes)[len("prefix"):]
		got, err := store.DecodeChanges(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(changes) {
			t.Errorf("decoded %+v, %v; want %+v", got, err, changes)
		}
		for i := range len(b) {
			if _, err := store.DecodeChanges(b[:i]); !errors.Is(err, store.ErrBadChanges) {
				t.Errorf("cut at %d of %d bytes: %v", i, len(b), err)
			}
		}
		if _, err := store.DecodeChanges(append(b, 0)); !errors.Is(err, store.ErrBadChanges) {
			t.Errorf("a byte more: %v", err)
		}
	}
	if _, err := store.DecodeChanges([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}); !errors.Is(err, store.ErrBadChanges) {
		t.Errorf("a huge count: %v", err)
	}
}

// FuzzDecodeChanges: any bytes decode or are refused; what decodes
// encodes to bytes that decode to it again (not always the same bytes: a
// uvarint may be written longer than it need be).
func FuzzDecodeChanges(f *testing.F) {
	for _, g := range goldenChanges {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		changes, err := store.DecodeChanges(b)
		if err != nil {
			return
		}
		again, err := store.DecodeChanges(store.AppendChanges(nil, changes))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(changes) {
			t.Errorf("%x decoded to %+v, which reads back as %+v, %v", b, changes, again, err)
		}
	})
}
