package boltstore

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
)

// TestPruneHistory: the records outside the retention (by revisions, by
// age) go, oldest first, at most max per call; the newer stay and read
// back; HistoryStats follows.
func TestPruneHistory(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for i := range 10 {
		if _, err := s.Update(ctx, func(tx store.Txn) error { return tx.Put("k/x", []byte{byte(i)}) }); err != nil {
			t.Fatal(err)
		}
	}
	rev := s.Revision()
	count := func() (n int, first uint64) {
		_, _, err := s.History(ctx, 0, 0, func(c store.Commit) error {
			if n == 0 {
				first = c.Rev
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, first
	}
	if n, _ := count(); n != 10 {
		t.Fatalf("%d records, want 10", n)
	}
	// Keep 4 revisions, 3 records a call.
	r := store.Retention{Revisions: 4}
	for _, want := range []int{3, 3, 0} {
		n, err := s.PruneHistory(ctx, r, time.Now(), 3)
		if err != nil || n != want {
			t.Fatalf("PruneHistory = %d, %v; want %d", n, err, want)
		}
	}
	if n, first := count(); n != 4 || first != rev-3 {
		t.Errorf("after pruning to 4 revisions: %d records from %d, want 4 from %d", n, first, rev-3)
	}
	st, err := s.HistoryStats(ctx)
	if err != nil || st.Oldest != rev-3 || st.Records != 4 || st.Bytes <= 0 || st.OldestTime.IsZero() {
		t.Errorf("HistoryStats = %+v, %v", st, err)
	}
	// By age: an hour from now, everything is older than a minute.
	if n, err := s.PruneHistory(ctx, store.Retention{Age: time.Minute}, time.Now().Add(time.Hour), 0); err != nil || n != 4 {
		t.Errorf("PruneHistory by age = %d, %v; want 4", n, err)
	}
	if n, _ := count(); n != 0 {
		t.Errorf("%d records left", n)
	}
	if s.Revision() != rev {
		t.Errorf("pruning spent revisions: %d, was %d", s.Revision(), rev)
	}
}

// TestHistoryStaged: records go through meta/histstage to meta/history,
// ten or so at a time; across both they read back in revision order,
// each once, page after page, and prune oldest first.
func TestHistoryStaged(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	var want []uint64
	for i := range 200 {
		rev, err := s.Update(ctx, func(tx store.Txn) error {
			return tx.Put("k/x", []byte(fmt.Sprintf("%0200d", i)))
		})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rev)
	}
	var staged, older int
	if err := s.viewBolt(func(tx *bolt.Tx) error {
		staged, older = tx.Bucket(histStageBucket).Stats().KeyN, tx.Bucket(historyBucket).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if staged == 0 || staged > 20 || staged+older != 200 {
		t.Errorf("%d records staged, %d older; want a few staged, 200 in all", staged, older)
	}
	read := func() (revs []uint64) {
		for after := uint64(0); ; {
			last, more, err := s.History(ctx, after, 7, func(c store.Commit) error {
				revs = append(revs, c.Rev)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if after = last; !more {
				return revs
			}
		}
	}
	if got := read(); !slices.Equal(got, want) {
		t.Fatalf("history\n%v\nwant\n%v", got, want)
	}
	if st, err := s.HistoryStats(ctx); err != nil || st.Records != 200 || st.Oldest != want[0] {
		t.Errorf("HistoryStats = %+v, %v", st, err)
	}
	// Keep the newest 5: the pruner empties meta/history and goes on
	// into the stage.
	for {
		n, err := s.PruneHistory(ctx, store.Retention{Revisions: 5}, time.Now(), 50)
		if err != nil {
			t.Fatal(err)
		}
		if n < 50 {
			break
		}
	}
	if got := read(); !slices.Equal(got, want[195:]) {
		t.Errorf("after pruning to 5: %v, want %v", got, want[195:])
	}
}

// TestHistoryGroupCommit: the records of group commits (64 writers at
// once) go to the stage or, with it, straight to meta/history, a batch
// at a time: each revision's record once, in revision order, the stage
// never past its size.
func TestHistoryGroupCommit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	const writers, each = 64, 20
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range each {
				_, err := s.Update(ctx, func(tx store.Txn) error {
					return tx.Put(fmt.Sprintf("k/%d", w), []byte(fmt.Sprintf(`{"i":%d,"pad":"%0100d"}`, i, 0)))
				})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var revs []uint64
	for after, more := uint64(0), true; more; {
		after, more, err = s.History(ctx, after, 0, func(c store.Commit) error {
			// Each record is its own commit's, whole: a writer's
			// first put created its key, each later one moved "i"
			// on by one (records are built in a buffer the next
			// commit reuses).
			if len(c.Writes) != 1 {
				t.Errorf("revision %d: %d writes, want 1", c.Rev, len(c.Writes))
				return nil
			}
			w := c.Writes[0]
			switch {
			case w.Op == store.Created && strings.HasPrefix(string(w.After), `{"i":0,`):
			case w.Op == store.Patched && len(w.Members) == 1 && w.Members[0].Name == "i":
				var b int
				if _, err := fmt.Sscan(string(w.Members[0].Before), &b); err != nil || fmt.Sprint(b+1) != string(w.Members[0].After) {
					t.Errorf("revision %d: %s: i %s -> %s", c.Rev, w.Key, w.Members[0].Before, w.Members[0].After)
				}
			default:
				t.Errorf("revision %d: %+v", c.Rev, w)
			}
			revs = append(revs, c.Rev)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(revs) != writers*each || revs[0] != 1 || revs[len(revs)-1] != s.Revision() || !slices.IsSorted(revs) {
		t.Fatalf("%d records from %d to %d (sorted %v), want %d from 1 to %d", len(revs), revs[0], revs[len(revs)-1], slices.IsSorted(revs), writers*each, s.Revision())
	}
	if err := s.viewBolt(func(tx *bolt.Tx) error {
		if n := bucketBytes(tx.Bucket(histStageBucket)); n > histStageMaxBytes {
			t.Errorf("the stage holds %d bytes, more than %d", n, histStageMaxBytes)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
