package etcdstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// The change set of a commit travels as the value of the feed key: a
// version byte, then the change set as store.AppendChanges encodes it.
//
// A group commit (several Updates in one etcd transaction) puts instead a
// version-2 value: the number of members, then each member's witness (the
// least key it puts, a string) and its version-1 change set (a string).
// A member's nested transaction may have failed its compares: its change
// set belongs to the revision only if its witness was put at it.
//
// A commit that keeps history puts a version-3 change set instead (alone
// or as a group member's): the length of its version-1 change set without
// the version byte (a uvarint), those bytes, then the commit's history
// record (store.AppendCommitHead), which is what etcd's history of the
// feed key keeps of the commit (history.go).
const (
	changesVersion = 1
	groupVersion   = 2
	historyVersion = 3
)

// encodeFeed encodes a commit's change set with its history record (nil:
// none, a version-1 value).
func encodeFeed(cs []watcher.Change, hist []byte) []byte {
	if hist == nil {
		return encodeChanges(cs)
	}
	n := store.ChangesSize(cs)
	b := make([]byte, 1, 1+binary.MaxVarintLen32+n+len(hist))
	b[0] = historyVersion
	changes := store.AppendChanges(make([]byte, 0, n), cs) // its length first
	b = binary.AppendUvarint(b, uint64(len(changes)))
	b = append(b, changes...)
	return append(b, hist...)
}

// splitFeed returns the change set (without its version byte) and the
// history record (nil: none) of a version-1 or version-3 value.
func splitFeed(b []byte) (changes, hist []byte, err error) {
	switch {
	case len(b) > 0 && b[0] == changesVersion:
		return b[1:], nil, nil
	case len(b) > 0 && b[0] == historyVersion:
		l, n := binary.Uvarint(b[1:])
		if n <= 0 || l > uint64(len(b)-1-n) {
			return nil, nil, errBadChanges
		}
		b = b[1+n:]
		return b[:l], b[l:], nil
	}
	return nil, nil, errBadChanges
}

func encodeChanges(cs []watcher.Change) []byte {
	b := make([]byte, 1, 1+store.ChangesSize(cs))
	b[0] = changesVersion
	return store.AppendChanges(b, cs)
}

var errBadChanges = errors.New("etcdstore: malformed change set")

func decodeChanges(b []byte) ([]watcher.Change, error) {
	cs, _, err := decodeFeed(b)
	return cs, err
}

// decodeFeed decodes a feed value's change set and returns its history
// record with it (nil: none), splitting the value once.
func decodeFeed(b []byte) ([]watcher.Change, []byte, error) {
	changes, hist, err := splitFeed(b)
	if err != nil {
		return nil, nil, err
	}
	cs, err := store.DecodeChanges(changes)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdstore: %w", err)
	}
	return cs, hist, nil
}

func encodeGroup(group []*proposal) []byte {
	n := 1 + binary.MaxVarintLen32
	for _, p := range group {
		n += 2*binary.MaxVarintLen32 + len(p.witness) + len(p.cs)
	}
	b := make([]byte, 0, n)
	b = append(b, groupVersion)
	b = binary.AppendUvarint(b, uint64(len(group)))
	for _, p := range group {
		b = binary.AppendUvarint(b, uint64(len(p.witness)))
		b = append(b, p.witness...)
		b = binary.AppendUvarint(b, uint64(len(p.cs)))
		b = append(b, p.cs...)
	}
	return b
}

// groupMember is one member of a decoded version-2 feed value.
type groupMember struct {
	witness string
	cs      []byte // version 1
}

func decodeGroup(b []byte) ([]groupMember, error) {
	if len(b) == 0 || b[0] != groupVersion {
		return nil, errBadChanges
	}
	b = b[1:]
	field := func() ([]byte, bool) {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, false
		}
		f := b[n : n+int(l)]
		b = b[n+int(l):]
		return f, true
	}
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return nil, errBadChanges
	}
	b = b[n:]
	ms := make([]groupMember, 0, count)
	for range count {
		w, ok1 := field()
		cs, ok2 := field()
		if !ok1 || !ok2 || len(w) == 0 {
			return nil, errBadChanges
		}
		ms = append(ms, groupMember{witness: string(w), cs: cs})
	}
	if len(b) != 0 {
		return nil, errBadChanges
	}
	return ms, nil
}
