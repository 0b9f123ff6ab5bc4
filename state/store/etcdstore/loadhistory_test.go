package etcdstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestLoadHistory: another store's history (here a store's own records
// with a revision of three records among them, as a group commit keeps,
// and revisions ahead of the cluster's) goes into an empty prefix's
// archive before its Load: the cluster's revision is moved past the
// newest, so the Load and every commit after it are numbered after the
// records; History reads them back byte for byte, in order, a revision's
// records together, then the new commits; the archiver and the pruner
// carry on from there; a second LoadHistory is refused.
func TestLoadHistory(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	src := open(t, config(shared, newPrefix(), store.Feed{}))
	commitN(t, ctx, src, 5, "src")
	type rec struct {
		rev uint64
		b   []byte
	}
	var want []rec
	if _, _, err := src.History(ctx, 0, 0, func(c store.Commit) error {
		want = append(want, rec{c.Rev, store.EncodeCommit(c)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) != 5 {
		t.Fatalf("the source has %d records", len(want))
	}
	// Three records of one revision, and a revision 400 past the
	// cluster's: what a bbolt source far ahead of this cluster gives.
	ahead := src.Revision() + 400
	for i := range 2 {
		c, err := store.DecodeCommit(want[2].rev, want[2].b)
		if err != nil {
			t.Fatal(err)
		}
		c.Origin.Who = fmt.Sprintf("group-%d", i)
		want = slices.Insert(want, 3+i, rec{c.Rev, store.EncodeCommit(c)})
	}
	last, _ := store.DecodeCommit(want[0].rev, want[0].b)
	last.Origin.Who = "ahead"
	want = append(want, rec{ahead, store.EncodeCommit(last)})

	dst := open(t, config(shared, newPrefix(), store.Feed{}))
	next := func(rs []rec) func() (uint64, []byte, error) {
		return func() (uint64, []byte, error) {
			if len(rs) == 0 {
				return 0, nil, io.EOF
			}
			r := rs[0]
			rs = rs[1:]
			return r.rev, r.b, nil
		}
	}
	n, err := dst.LoadHistory(ctx, ahead, next(want))
	if err != nil || n != len(want) {
		t.Fatalf("LoadHistory = %d, %v", n, err)
	}
	if _, err := dst.LoadHistory(ctx, ahead, next(want)); err == nil {
		t.Fatal("a second LoadHistory was taken")
	}
	loadOne(t, ctx, dst)
	after := commitN(t, ctx, dst, 3, "dst")
	if after[0] <= ahead {
		t.Fatalf("the first commit after the load is revision %d, not after %d", after[0], ahead)
	}
	check := func(what string) {
		t.Helper()
		for _, limit := range []int{1, 2, 1000} {
			var got []rec
			for from := uint64(0); ; {
				var revs []uint64
				l, more, err := dst.History(ctx, from, limit, func(c store.Commit) error {
					got = append(got, rec{c.Rev, store.EncodeCommit(c)})
					if len(revs) == 0 || revs[len(revs)-1] != c.Rev {
						revs = append(revs, c.Rev)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(revs) > limit {
					t.Fatalf("%s: a call of limit %d read revisions %v", what, limit, revs)
				}
				if !more {
					break
				}
				from = l
			}
			if len(got) != len(want)+len(after) {
				t.Fatalf("%s, limit %d: %d records, want %d", what, limit, len(got), len(want)+len(after))
			}
			for i, w := range want {
				if got[i].rev != w.rev || !bytes.Equal(got[i].b, w.b) {
					t.Fatalf("%s, limit %d: record %d is of revision %d, want %d (or other bytes)", what, limit, i, got[i].rev, w.rev)
				}
			}
			for i, r := range after {
				if got[len(want)+i].rev != r {
					t.Fatalf("%s: record %d is of revision %d, want %d", what, len(want)+i, got[len(want)+i].rev, r)
				}
			}
		}
	}
	check("loaded")
	// An error of the visitor's comes back as it is from the archive too
	// (state's past views stop a read so).
	stop := errors.New("stop")
	if _, _, err := dst.History(ctx, 0, 1, func(store.Commit) error { return stop }); err != stop {
		t.Fatalf("History's visitor's error came back as %v", err)
	}
	st, err := dst.HistoryStats(ctx)
	if err != nil || st.Oldest != want[0].rev || st.Records != int64(len(want)) || st.Bytes <= 0 {
		t.Fatalf("HistoryStats = %+v, %v; want %d records from %d", st, err, len(want), want[0].rev)
	}
	if rev, err := dst.ArchiveHistory(ctx); err != nil || rev < after[len(after)-1] {
		t.Fatalf("ArchiveHistory = %d, %v", rev, err)
	}
	check("archived")
	// Keeping the newest revisions only: the carried records go, the
	// new ones stay.
	if _, err := dst.PruneHistory(ctx, store.Retention{Revisions: uint64(after[len(after)-1] - ahead)}, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	if st, err := dst.HistoryStats(ctx); err != nil || st.Oldest <= ahead {
		t.Fatalf("after pruning HistoryStats = %+v, %v", st, err)
	}
}

// TestLoadHistoryElidesLarge: a carried revision whose records would take
// a transaction past half of etcd's request limit keeps the keys it wrote
// only, as a commit that large keeps on etcd.
func TestLoadHistoryElidesLarge(t *testing.T) {
	ctx := bounded(t, time.Minute)
	dst := open(t, config(shared, newPrefix(), store.Feed{}))
	c := store.Commit{Rev: 3, Time: time.Unix(100, 0).UTC(), Origin: store.Origin{Who: "user-admin"}}
	big := store.AppendCommitHead(nil, c.Time, c.Origin)
	big = store.AppendWrite(big, "model/m/big", nil, false, bytes.Repeat([]byte("x"), shared.MaxRequestBytes()/2+1), true)
	big = store.AppendWrite(big, "model/m/small", nil, false, []byte("{}"), true)
	sent := false
	if n, err := dst.LoadHistory(ctx, 3, func() (uint64, []byte, error) {
		if sent {
			return 0, nil, io.EOF
		}
		sent = true
		return 3, big, nil
	}); err != nil || n != 1 {
		t.Fatalf("LoadHistory = %d, %v", n, err)
	}
	loadOne(t, ctx, dst)
	var got []store.Commit
	if _, _, err := dst.History(ctx, 0, 0, func(c store.Commit) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	want, _ := store.DecodeCommit(3, big)
	if len(got) != 1 || !bytes.Equal(store.EncodeCommit(got[0]), store.ElideCommit(want)) || got[0].Writes[0].Op != store.Elided || len(got[0].Writes) != 2 {
		t.Fatalf("History = %+v", got)
	}
}

// loadOne loads one record into s (empty).
func loadOne(t *testing.T, ctx context.Context, s *etcdstore.Store) {
	t.Helper()
	loaded := false
	if _, err := s.Load(ctx, func() (string, []byte, error) {
		if loaded {
			return "", nil, io.EOF
		}
		loaded = true
		return "k/a", []byte("loaded"), nil
	}); err != nil {
		t.Fatal(err)
	}
}
