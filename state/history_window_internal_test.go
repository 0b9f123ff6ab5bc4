package state

import (
	"testing"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// windowCommits are commits of revisions revs, each a patch of one
// machine's life.
func windowCommits(revs ...uint64) []store.Commit {
	var cs []store.Commit
	for _, r := range revs {
		cs = append(cs, store.Commit{Rev: r, Writes: []store.Write{{Key: "machine/m/0", Op: store.Patched,
			Members: []store.MemberChange{{Name: "life", Before: []byte(`"alive"`), After: []byte(`"dying"`)}}}}})
	}
	return cs
}

func revsOf(cs []store.Commit) []uint64 {
	var out []uint64
	for _, c := range cs {
		out = append(out, c.Rev)
	}
	return out
}

// TestHistoryWindowBounds: the window answers only a range it holds
// whole, gives the commits of exactly that range, drops its oldest
// commits past its bytes and those older than the oldest revision the
// store kept, and keeps a slim copy of a commit (what historyChange
// reads, nothing shared with the store's buffer).
func TestHistoryWindowBounds(t *testing.T) {
	w := newHistoryWindow()
	defer w.close()
	cs := windowCommits(12, 15, 20)
	w.store(10, 25, cs, sizeOf(cs), 1)
	for _, tc := range []struct {
		from, upto uint64
		ok         bool
		want       []uint64
	}{
		{10, 25, true, []uint64{12, 15, 20}},
		{12, 20, true, []uint64{15, 20}},
		{15, 19, true, nil},
		{9, 20, false, nil},
		{12, 26, false, nil},
	} {
		got, ok := w.get(tc.from, tc.upto)
		if ok != tc.ok || len(revsOf(got)) != len(tc.want) {
			t.Errorf("get(%d, %d) = %v, %v; want %v, %v", tc.from, tc.upto, revsOf(got), ok, tc.want, tc.ok)
			continue
		}
		for i, r := range revsOf(got) {
			if r != tc.want[i] {
				t.Errorf("get(%d, %d) = %v, want %v", tc.from, tc.upto, revsOf(got), tc.want)
			}
		}
	}
	// The store keeps revisions from 16 on: 12 and 15 go, and a resume
	// from before 15 is no longer the window's.
	w.store(10, 25, cs, sizeOf(cs), 16)
	if _, ok := w.get(14, 25); ok {
		t.Error("the window answers a resume from before the oldest revision kept")
	}
	if got, ok := w.get(15, 25); !ok || len(got) != 1 || got[0].Rev != 20 {
		t.Errorf("get(15, 25) = %v, %v; want [20]", revsOf(got), ok)
	}
	// Past its bytes, the oldest go first.
	big := windowCommits(30, 31, 32)
	big[0].Writes[0].Members[0].After = make([]byte, windowMaxBytes)
	w.store(29, 40, big, sizeOf(big), 1)
	if w.lo != 30 || len(w.commits) != 2 {
		t.Errorf("after a commit past the bytes: window (%d, %d] of %v, want (30, 40] of [31 32]", w.lo, w.hi, revsOf(w.commits))
	}

	buf := []byte(`"dead"`)
	s := slim(store.Commit{Rev: 7, Writes: []store.Write{{Key: "machine/m/1", Op: store.Patched, Members: []store.MemberChange{
		{Name: "life", Before: []byte(`"dying"`), After: buf}, {Name: "status", Before: []byte("1"), After: []byte("2")}}}}})
	buf[1] = 'X'
	m := s.Writes[0].Members
	if string(m[0].After) != `"dead"` || m[0].Before != nil || m[1].Name != "status" || m[1].After != nil {
		t.Errorf("slim = %+v", s)
	}
	c, ok := historyChange(s.Writes[0], watcher.Filter{Kind: KindMachine, Model: "m", Fields: []string{watcher.FieldLife}})
	if !ok || c.ID != "1" {
		t.Errorf("historyChange of the slim write = %+v, %v", c, ok)
	}
}
