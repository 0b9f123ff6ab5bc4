package store

import (
	"encoding/binary"
	"errors"

	"github.com/provisiond/provisiond/watcher"
)

// The change-set codec both engines persist a commit's changes with (bbolt
// in its change-set buckets, etcd on its feed key, each framed its own
// way). A change set is the number of its changes, then each change's
// kind, model, id and parent and the number of its fields and each field:
// every number a uvarint, every string its length (a uvarint) and its
// bytes. One allocation to encode, where encoding/json took twenty; a
// change of three short fields is about 60 bytes, against 150 as JSON.
// The format is on disk and in etcd: changing it needs a new version of
// each engine's framing.

// ErrBadChanges is returned by DecodeChanges for bytes that are not a
// change set.
var ErrBadChanges = errors.New("malformed change set")

// ChangesSize is an upper bound on the length of the encoding of changes,
// for a buffer AppendChanges fills without growing it.
func ChangesSize(changes []watcher.Change) int {
	const num = binary.MaxVarintLen32 // lengths and counts of one change set fit in 32 bits
	n := num
	for _, c := range changes {
		n += 5*num + len(c.Kind) + len(c.Model) + len(c.ID) + len(c.Parent)
		for _, f := range c.Fields {
			n += num + len(f)
		}
	}
	return n
}

// AppendChanges appends the encoding of changes to b.
func AppendChanges(b []byte, changes []watcher.Change) []byte {
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(changes)))
	for _, c := range changes {
		str(string(c.Kind))
		str(c.Model)
		str(c.ID)
		str(c.Parent)
		b = binary.AppendUvarint(b, uint64(len(c.Fields)))
		for _, f := range c.Fields {
			str(f)
		}
	}
	return b
}

// DecodeChanges decodes a change set AppendChanges wrote, which must be the
// whole of b. The changes share no memory with b. A change without fields
// has nil Fields; a change set without changes is an empty, not nil,
// slice.
func DecodeChanges(b []byte) ([]watcher.Change, error) {
	// Every count and length is at most the bytes left: each element
	// takes one byte at least, so garbage cannot make it allocate more
	// than len(b) elements.
	num := func() (uint64, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > uint64(len(b)-n) {
			return 0, false
		}
		b = b[n:]
		return v, true
	}
	str := func() (string, bool) {
		l, ok := num()
		if !ok {
			return "", false
		}
		s := string(b[:l])
		b = b[l:]
		return s, true
	}
	n, ok := num()
	if !ok {
		return nil, ErrBadChanges
	}
	changes := make([]watcher.Change, n)
	for i := range changes {
		c := &changes[i]
		kind, ok1 := str()
		model, ok2 := str()
		id, ok3 := str()
		parent, ok4 := str()
		nf, ok5 := num()
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
			return nil, ErrBadChanges
		}
		c.Kind, c.Model, c.ID, c.Parent = watcher.Kind(kind), model, id, parent
		if nf > 0 {
			c.Fields = make([]string, nf)
			for j := range c.Fields {
				if c.Fields[j], ok = str(); !ok {
					return nil, ErrBadChanges
				}
			}
		}
	}
	if len(b) != 0 {
		return nil, ErrBadChanges
	}
	return changes, nil
}
