package etcdstore

import (
	"encoding/binary"
	"errors"

	"github.com/provisiond/provisiond/watcher"
)

// The change set of a commit travels as the value of the feed key, encoded
// compactly: a version byte, then the number of changes, then each change's
// kind, model, id and parent and its fields, strings as a uvarint length
// and the bytes. A change set of one change of three short fields is about
// 60 bytes, against 150 as JSON, and encodes without reflection.
//
// A group commit (several Updates in one etcd transaction) puts instead a
// version-2 value: the number of members, then each member's witness (the
// least key it puts, a string) and its version-1 change set (a string).
// A member's nested transaction may have failed its compares: its change
// set belongs to the revision only if its witness was put at it.
const (
	changesVersion = 1
	groupVersion   = 2
)

func encodeChanges(cs []watcher.Change) []byte {
	n := 2
	for _, c := range cs {
		n += 4*binary.MaxVarintLen32 + len(c.Kind) + len(c.Model) + len(c.ID) + len(c.Parent) + binary.MaxVarintLen32
		for _, f := range c.Fields {
			n += binary.MaxVarintLen32 + len(f)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, changesVersion)
	b = binary.AppendUvarint(b, uint64(len(cs)))
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, c := range cs {
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

var errBadChanges = errors.New("etcdstore: malformed change set")

func decodeChanges(b []byte) ([]watcher.Change, error) {
	if len(b) == 0 || b[0] != changesVersion {
		return nil, errBadChanges
	}
	b = b[1:]
	num := func() (int, bool) {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > uint64(len(b)) {
			return 0, false
		}
		b = b[n:]
		return int(v), true
	}
	str := func() (string, bool) {
		l, ok := num()
		if !ok || l > len(b) {
			return "", false
		}
		s := string(b[:l])
		b = b[l:]
		return s, true
	}
	count, ok := num()
	if !ok {
		return nil, errBadChanges
	}
	cs := make([]watcher.Change, 0, count)
	for range count {
		var c watcher.Change
		kind, ok1 := str()
		c.Model, ok = str()
		ok1 = ok1 && ok
		c.ID, ok = str()
		ok1 = ok1 && ok
		c.Parent, ok = str()
		ok1 = ok1 && ok
		nf, ok := num()
		if !ok1 || !ok {
			return nil, errBadChanges
		}
		c.Kind = watcher.Kind(kind)
		if nf > 0 {
			c.Fields = make([]string, nf)
			for i := range c.Fields {
				if c.Fields[i], ok = str(); !ok {
					return nil, errBadChanges
				}
			}
		}
		cs = append(cs, c)
	}
	if len(b) != 0 {
		return nil, errBadChanges
	}
	return cs, nil
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
