package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

// carried is a history record of another store, as a migration carries it.
type carried struct {
	rev uint64
	rec []byte
}

// carriedHistory makes records of revisions 5, 9, 9, 9 (three records of
// one revision, as an etcd group commit keeps), 12 and 40: each with its
// own origin and time.
func carriedHistory() []carried {
	var out []carried
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for i, rev := range []uint64{5, 9, 9, 9, 12, 40} {
		b := store.AppendCommitHead(nil, t0.Add(time.Duration(i)*time.Second), store.Origin{Who: fmt.Sprintf("user-%d", i), Addr: "10.0.0.1:5", Daemon: "d1", Call: "ModelAdmin.AddMachines"})
		b = store.AppendWrite(b, fmt.Sprintf("machine/m/%d", i), nil, false, []byte(`{"life":"alive"}`), true)
		out = append(out, carried{rev, b})
	}
	return out
}

func feed(recs []carried) func() (uint64, []byte, error) {
	return func() (uint64, []byte, error) {
		if len(recs) == 0 {
			return 0, nil, io.EOF
		}
		r := recs[0]
		recs = recs[1:]
		return r.rev, r.rec, nil
	}
}

// readAll reads s's whole history, limit revisions a call, and checks
// that no call splits a revision's records.
func readAll(t *testing.T, s *Store, limit int) []carried {
	t.Helper()
	var out []carried
	for after := uint64(0); ; {
		var revs []uint64
		last, more, err := s.History(context.Background(), after, limit, func(c store.Commit) error {
			out = append(out, carried{c.Rev, store.EncodeCommit(c)})
			if len(revs) == 0 || revs[len(revs)-1] != c.Rev {
				revs = append(revs, c.Rev)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) > limit {
			t.Fatalf("a call of limit %d read %d revisions", limit, len(revs))
		}
		if !more {
			return out
		}
		after = last
	}
}

func sameCarried(t *testing.T, got, want []carried) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].rev != want[i].rev || !bytes.Equal(got[i].rec, want[i].rec) {
			t.Fatalf("record %d: revision %d %q, want %d %q", i, got[i].rev, got[i].rec, want[i].rev, want[i].rec)
		}
	}
}

// TestLoadHistory: a carried history (a revision with three records among
// them) goes in before or after the Load, reads back byte for byte and in
// order, a revision's records never split across calls; the Load and
// the commits after it are numbered after the revision loaded; the file
// reopens with all of it; a second LoadHistory, or one into a store with
// commits of its own, is refused; pruning takes a revision's records
// together.
func TestLoadHistory(t *testing.T) {
	for _, when := range []string{"before", "after"} {
		t.Run(when, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			want := carriedHistory()
			const through = 50
			load := func() {
				done := false
				n, err := s.Load(ctx, func() (string, []byte, error) {
					if done {
						return "", nil, io.EOF
					}
					done = true
					return "k/a", []byte("loaded"), nil
				})
				if err != nil || n != 1 {
					t.Fatalf("Load = %d, %v", n, err)
				}
			}
			if when == "after" {
				load()
			}
			n, err := s.LoadHistory(ctx, through, feed(want))
			if err != nil || n != len(want) {
				t.Fatalf("LoadHistory = %d, %v", n, err)
			}
			if when == "before" {
				load()
			}
			if got := s.Revision(); got != through+1 {
				t.Fatalf("revision after the load %d, want %d", got, through+1)
			}
			if _, err := s.LoadHistory(ctx, through, feed(want)); err == nil {
				t.Fatal("a second LoadHistory was taken")
			}
			rev, err := s.Update(store.WithOrigin(ctx, store.Origin{Who: "user-new"}), func(tx store.Txn) error { return tx.Put("k/x", []byte("1")) })
			if err != nil || rev != through+2 {
				t.Fatalf("the first commit after: revision %d, %v; want %d", rev, err, through+2)
			}
			for _, limit := range []int{1, 2, 1000} {
				got := readAll(t, s, limit)
				sameCarried(t, got[:len(want)], want)
				if len(got) != len(want)+1 || got[len(want)].rev != rev {
					t.Fatalf("limit %d: %d records, the last of revision %d", limit, len(got), got[len(got)-1].rev)
				}
			}
			st, err := s.HistoryStats(ctx)
			if err != nil || st.Oldest != 5 || st.Records != int64(len(want)+1) || !st.OldestTime.Equal(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)) {
				t.Fatalf("HistoryStats = %+v, %v", st, err)
			}
			s.Close()
			if s, err = Open(path, Options{}); err != nil {
				t.Fatal(err)
			}
			sameCarried(t, readAll(t, s, 3)[:len(want)], want)
			// Two records a commit: the second call stops at revision 9's
			// first record and takes all three.
			pruned := 0
			for range 3 {
				n, err := s.PruneHistory(ctx, store.Retention{Revisions: through - 10}, time.Now(), 2)
				if err != nil {
					t.Fatal(err)
				}
				pruned += n
			}
			if pruned != 5 {
				t.Fatalf("pruned %d records, want 5 (revisions 5, 9, 9, 9, 12)", pruned)
			}
			if got := readAll(t, s, 1); got[0].rev != 40 {
				t.Fatalf("after pruning the oldest is %d", got[0].rev)
			}
		})
	}
	// A store with commits of its own refuses.
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 {
		if _, err := s.Update(t.Context(), func(tx store.Txn) error { return tx.Put("k/x", []byte("1")) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.LoadHistory(t.Context(), 50, feed(carriedHistory())); err == nil {
		t.Fatal("LoadHistory into a store with commits of its own was taken")
	}
}
