package watcher_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/provisiond/provisiond/watcher"
)

// TestIDSetIsASet: random adds, removes and clears on an IDSet and on a
// map agree at every step, across the move from the slice to the map and
// back after a clear.
func TestIDSetIsASet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s watcher.IDSet
	want := map[string]bool{}
	if s.Len() != 0 || s.Has("x") || s.Remove("x") || len(s.AppendSorted(nil)) != 0 {
		t.Fatal("the zero IDSet is not empty")
	}
	for step := range 20000 {
		span := 4 + step/1000 // from a few ids to more than the slice holds
		id := strconv.Itoa(r.IntN(span))
		switch op := r.IntN(100); {
		case op < 55:
			if got, w := s.Add(id), !want[id]; got != w {
				t.Fatalf("step %d: Add(%s) = %v, want %v", step, id, got, w)
			}
			want[id] = true
		case op < 95:
			if got, w := s.Remove(id), want[id]; got != w {
				t.Fatalf("step %d: Remove(%s) = %v, want %v", step, id, got, w)
			}
			delete(want, id)
		default:
			s.Clear()
			clear(want)
		}
		if s.Len() != len(want) || s.Has(id) != want[id] {
			t.Fatalf("step %d: Len %d Has(%s) %v, want %d %v", step, s.Len(), id, s.Has(id), len(want), want[id])
		}
	}
	ids := s.AppendSorted([]string{"prefix"})
	var w []string
	for id := range want {
		w = append(w, id)
	}
	slices.Sort(w)
	if !slices.Equal(ids[1:], w) || ids[0] != "prefix" {
		t.Errorf("AppendSorted = %v, want prefix then %v", ids, w)
	}
}

// An IDSet's first two ids cost one small allocation, its data and their
// array together; once cleared it keeps it, so a watcher that takes its
// few pending ids at each Next allocates nothing more for them.
func TestIDSetFewAllocations(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		var s watcher.IDSet
		s.Add("a")
		s.Add("b")
	}); n != 1 {
		t.Errorf("a new set's first two ids allocate %v times, want 1", n)
	}
	var s watcher.IDSet
	s.Add("a")
	s.Add("b")
	s.Clear()
	if n := testing.AllocsPerRun(100, func() {
		s.Add("a")
		s.Add("b")
		s.Clear()
	}); n != 0 {
		t.Errorf("adding two ids to a cleared set allocates %v times, want 0", n)
	}
}
