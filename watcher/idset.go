package watcher

import "slices"

// idSetFew is the most ids an IDSet holds in its slice; past it they move
// to a map.
const idSetFew = 8

// IDSet is a set of ids that holds a few in a slice and more in a map.
// Most watchers' sets hold none or a handful (an agent's containers, the
// ids changed since the last Next), and a Go map's smallest table with its
// header is about 200-250 bytes, most of such a watcher's memory and all
// of it pointers for the collector to scan; a set of one or two ids is
// one object of 64 bytes. A set that has never held an id is one nil
// pointer.
//
// The zero value is an empty set. An IDSet is not safe for concurrent use.
type IDSet struct {
	d *idSetData // nil until the first Add
}

type idSetData struct {
	few  []string            // at most idSetFew; unused once many is made
	many map[string]struct{} // nil until the set outgrows few
	// first is few's array until it outgrows it: a set's first ids cost
	// no allocation of their own (an agent's container watcher holds one
	// or two, and each of its watchers had made two objects for them).
	first [idSetFirst]string
}

// idSetFirst is how many ids an IDSet holds in the allocation it makes
// at its first Add.
const idSetFirst = 2

// Len returns the number of ids in the set.
func (s *IDSet) Len() int {
	switch {
	case s.d == nil:
		return 0
	case s.d.many != nil:
		return len(s.d.many)
	}
	return len(s.d.few)
}

// Has reports whether id is in the set.
func (s *IDSet) Has(id string) bool {
	switch {
	case s.d == nil:
		return false
	case s.d.many != nil:
		_, ok := s.d.many[id]
		return ok
	}
	return slices.Contains(s.d.few, id)
}

// Add puts id in the set and reports whether it was not there.
func (s *IDSet) Add(id string) bool {
	if s.d == nil {
		s.d = &idSetData{}
		s.d.few = s.d.first[:0]
	}
	d := s.d
	if d.many != nil {
		if _, ok := d.many[id]; ok {
			return false
		}
		d.many[id] = struct{}{}
		return true
	}
	if slices.Contains(d.few, id) {
		return false
	}
	if len(d.few) < idSetFew {
		d.few = append(d.few, id)
		return true
	}
	d.many = make(map[string]struct{}, 2*idSetFew)
	for _, x := range d.few {
		d.many[x] = struct{}{}
	}
	d.many[id] = struct{}{}
	d.few = nil
	return true
}

// Remove takes id out of the set and reports whether it was there.
func (s *IDSet) Remove(id string) bool {
	switch {
	case s.d == nil:
		return false
	case s.d.many != nil:
		if _, ok := s.d.many[id]; !ok {
			return false
		}
		delete(s.d.many, id)
		return true
	}
	i := slices.Index(s.d.few, id)
	if i < 0 {
		return false
	}
	s.d.few = slices.Delete(s.d.few, i, i+1)
	return true
}

// Clear empties the set. A set that had moved to a map lets it go (it
// would keep its grown table for good otherwise) and starts again small.
func (s *IDSet) Clear() {
	if s.d == nil {
		return
	}
	if s.d.many != nil {
		s.d.many = nil
		return
	}
	clear(s.d.few) // drop the strings, keep the small array
	s.d.few = s.d.few[:0]
}

// AppendSorted appends the set's ids to dst in sorted order and returns
// the result.
func (s *IDSet) AppendSorted(dst []string) []string {
	if s.d == nil {
		return dst
	}
	n := len(dst)
	if s.d.many != nil {
		for id := range s.d.many {
			dst = append(dst, id)
		}
	} else {
		dst = append(dst, s.d.few...)
	}
	slices.Sort(dst[n:])
	return dst
}
