package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// historyRevs reads the whole history of s, a page of 7 revisions at a
// time, and returns each record's revision and who (one per record: a
// revision twice is a record read twice).
func historyRevs(t *testing.T, ctx context.Context, s *etcdstore.Store) (revs []uint64, whos []string) {
	t.Helper()
	for after := uint64(0); ; {
		last, more, err := s.History(ctx, after, 7, func(c store.Commit) error {
			revs = append(revs, c.Rev)
			whos = append(whos, c.Origin.Who)
			return nil
		})
		if err != nil {
			t.Fatalf("History after %d: %v", after, err)
		}
		after = last
		if !more {
			return revs, whos
		}
	}
}

// commitN commits n writes through s, each with its own origin, and
// returns their revisions.
func commitN(t *testing.T, ctx context.Context, s store.Store, n int, tag string) []uint64 {
	t.Helper()
	var revs []uint64
	for i := range n {
		who := fmt.Sprintf("%s-%d", tag, i)
		rev, err := s.Update(store.WithOrigin(ctx, store.Origin{Who: who}), func(tx store.Txn) error {
			return tx.Put("machine/m/"+tag, []byte(fmt.Sprintf(`{"n":%d}`, i)))
		})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	return revs
}

// TestHistoryArchive: the compactor's normal interval with history on.
// The archiver copies the records from the feed key's history to the
// archive, etcd's history is compacted past them (its old versions are
// gone), and History still returns every record, archived and newer, in
// order and once; HistoryStats counts the archive.
func TestHistoryArchive(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	s := open(t, config(shared, newPrefix(), store.Feed{}))
	first := commitN(t, ctx, s, 40, "a")
	archived, err := s.ArchiveHistory(ctx)
	if err != nil || archived != first[len(first)-1] {
		t.Fatalf("ArchiveHistory = %d, %v; want %d", archived, err, first[len(first)-1])
	}
	// Again: nothing new, nothing written.
	if again, err := s.ArchiveHistory(ctx); err != nil || again != archived {
		t.Fatalf("ArchiveHistory again = %d, %v", again, err)
	}
	if err := s.Compact(ctx, archived); err != nil {
		t.Fatal(err)
	}
	// etcd no longer has the feed key's versions of the archived commits.
	cli := clientFor(t, shared.Endpoints())
	if _, err := cli.Get(ctx, s.Prefix()+"meta/changes", clientv3.WithRev(int64(first[0]))); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("the feed key at revision %d after compaction: %v, want compacted", first[0], err)
	}
	second := commitN(t, ctx, s, 10, "b") // in the feed key's history only
	want := append(slices.Clone(first), second...)
	revs, whos := historyRevs(t, ctx, s)
	if !slices.Equal(revs, want) {
		t.Fatalf("History revisions\n%v\nwant\n%v", revs, want)
	}
	if whos[0] != "a-0" || whos[40] != "b-0" {
		t.Errorf("origins %v", whos)
	}
	st, err := s.HistoryStats(ctx)
	if err != nil || st.Records != 40 || st.Bytes <= 0 || st.Oldest != first[0] || st.OldestTime.IsZero() {
		t.Errorf("HistoryStats = %+v, %v; want 40 records from %d", st, err, first[0])
	}
	// The second lot archived and compacted too: all still there.
	if archived, err = s.ArchiveHistory(ctx); err != nil || archived != second[len(second)-1] {
		t.Fatalf("ArchiveHistory = %d, %v", archived, err)
	}
	if err := s.Compact(ctx, archived); err != nil {
		t.Fatal(err)
	}
	if revs, _ := historyRevs(t, ctx, s); !slices.Equal(revs, want) {
		t.Fatalf("after the second compaction\n%v\nwant\n%v", revs, want)
	}
	// Pruning, a batch at a time (each archiving made one): keeping the
	// newest 5 revisions, the first batch goes and the second, with
	// records inside, stays whole.
	if n, err := s.PruneHistory(ctx, store.Retention{Revisions: 5}, time.Now(), 0); err != nil || n != 40 {
		t.Fatalf("PruneHistory keeping 5 = %d, %v; want 40", n, err)
	}
	if revs, _ := historyRevs(t, ctx, s); !slices.Equal(revs, second) {
		t.Fatalf("after pruning to 5 revisions\n%v\nwant\n%v", revs, second)
	}
	commitN(t, ctx, s, 3, "c")
	if n, err := s.PruneHistory(ctx, store.Retention{Age: time.Minute}, time.Now().Add(time.Hour), 0); err != nil || n != 10 {
		t.Fatalf("PruneHistory by age = %d, %v; want 10", n, err)
	}
	revs, _ = historyRevs(t, ctx, s)
	if len(revs) != 3 {
		t.Errorf("after pruning: %v, want the 3 newest (not archived)", revs)
	}
	if st, err := s.HistoryStats(ctx); err != nil || st.Records != 0 || st.Bytes != 0 {
		t.Errorf("HistoryStats after pruning = %+v, %v", st, err)
	}
}

// TestHistoryArchiveFailover: the archiver and compactor run by whichever
// store leads the "compactor" election, as the daemons do, while writers
// commit through both; the leader's store dies (closed, its lease and
// campaign gone) mid-way, and a third archiver outside the election races
// them all along (a leader that has not yet seen it lost). Every record
// committed is in the history exactly once.
func TestHistoryArchiveFailover(t *testing.T) {
	ctx := bounded(t, 3*time.Minute)
	prefix := newPrefix()
	cfg := config(shared, prefix, store.Feed{})
	cfg.RequestTimeout = 30 * time.Second // a loaded 2-core box
	a, b, c := open(t, cfg), open(t, cfg), open(t, cfg)

	// lead runs the archiver and compactor of s while it leads.
	lead := func(ctx context.Context, s *etcdstore.Store, led chan<- string, name string) {
		leading, resign, err := s.Elect(ctx, "compactor")
		if err != nil {
			return
		}
		defer resign()
		led <- name
		for pace(leading) {
			if archived, err := s.ArchiveHistory(leading); err == nil {
				_ = s.Compact(leading, archived)
			}
		}
	}
	led := make(chan string, 2)
	var wg sync.WaitGroup
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	wg.Add(3)
	go func() { defer wg.Done(); lead(lctx, a, led, "a") }()
	first := <-led // a, which campaigned first... or b, whichever won
	if first != "a" {
		t.Fatalf("%s leads before b campaigned", first)
	}
	go func() { defer wg.Done(); lead(lctx, b, led, "b") }()
	go func() {
		defer wg.Done()
		for pace(lctx) {
			_, _ = c.ArchiveHistory(lctx)
		}
	}()

	var mu sync.Mutex
	var want []uint64
	write := func(s store.Store, tag string, n int) {
		revs := commitN(t, ctx, s, n, tag)
		mu.Lock()
		want = append(want, revs...)
		mu.Unlock()
	}
	run(2, func(g int) { write([]store.Store{a, b}[g], fmt.Sprint("w", g), 30) })
	a.Close() // the leader dies
	select {
	case who := <-led:
		if who != "b" {
			t.Fatalf("%s leads after a died", who)
		}
	case <-ctx.Done():
		t.Fatal("b never led after a died")
	}
	run(2, func(g int) { write([]store.Store{b, c}[g], fmt.Sprint("x", g), 30) })
	stop()
	wg.Wait()
	slices.Sort(want)
	for _, s := range []*etcdstore.Store{b, c} {
		if err := s.WaitApplied(ctx, want[len(want)-1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.ArchiveHistory(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := historyRevs(t, ctx, c)
	if !slices.Equal(got, want) {
		t.Fatalf("history after the failover (%d records):\n%v\nwant (%d):\n%v", len(got), got, len(want), want)
	}
	st, err := c.HistoryStats(ctx)
	if err != nil || st.Records != int64(len(want)) {
		t.Errorf("HistoryStats = %+v, %v; want %d records archived", st, err, len(want))
	}
}

// pace waits a few milliseconds between the rounds of an archiver (so
// that it does not spin), and reports whether ctx still runs.
func pace(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(5 * time.Millisecond):
		return true
	}
}

// TestHistoryLost: etcd's history compacted, through etcd's own client
// (as an operator, etcd's auto-compaction or the compactor when etcd is
// out of space may), past records not yet archived. The records between
// the archive's mark and the compact revision C are lost: a read after a
// revision before C-1 fails with store.ErrHistoryGone rather than skip
// them, a read after C-1 (C is kept: etcd compacts the versions older
// than it) or after 0 reads from C, and HistoryStats names C the oldest.
// So before the archiver has seen the loss and after (the mark keeps it),
// and after the archive is compacted past as usual.
func TestHistoryLost(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	s := open(t, config(shared, newPrefix(), store.Feed{}))
	archived := commitN(t, ctx, s, 10, "a")
	if rev, err := s.ArchiveHistory(ctx); err != nil || rev != archived[len(archived)-1] {
		t.Fatalf("ArchiveHistory = %d, %v", rev, err)
	}
	unarchived := commitN(t, ctx, s, 10, "b")
	lost, kept := unarchived[:5], unarchived[5:]
	cli := clientFor(t, shared.Endpoints())
	if _, err := cli.Compact(ctx, int64(kept[0])); err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		for _, after := range []uint64{archived[0], archived[len(archived)-1], lost[0], kept[0] - 2} {
			_, _, err := s.History(ctx, after, 0, func(store.Commit) error { return nil })
			if !errors.Is(err, store.ErrHistoryGone) {
				t.Errorf("%s: History after %d, before the records lost: %v, want ErrHistoryGone", when, after, err)
			}
		}
		for _, after := range []uint64{0, kept[0] - 1} {
			var revs []uint64
			_, _, err := s.History(ctx, after, 0, func(c store.Commit) error {
				revs = append(revs, c.Rev)
				return nil
			})
			if err != nil || !slices.Equal(revs, kept) {
				t.Errorf("%s: History after %d = %v, %v; want %v", when, after, revs, err, kept)
			}
		}
		if st, err := s.HistoryStats(ctx); err != nil || st.Oldest != kept[0] || st.OldestTime.IsZero() {
			t.Errorf("%s: HistoryStats = %+v, %v; want the oldest %d", when, st, err, kept[0])
		}
	}
	check("before archiving")
	rev, err := s.ArchiveHistory(ctx)
	if err != nil || rev != kept[len(kept)-1] {
		t.Fatalf("ArchiveHistory after the loss = %d, %v; want %d", rev, err, kept[len(kept)-1])
	}
	check("archived")
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	check("archived and compacted")
}

// TestHistoryLongRead: reading a long stretch of etcd's history (a watch
// resumed after a restart) is not bounded by one request timeout: etcd
// answers in pages, each bounded on its own (and each read of a group
// commit's witnesses on its own), and the caller's ctx bounds the whole.
// Writers commit through one store in parallel (group commits, whose
// records History checks against their witnesses); a reader whose request
// timeout is far shorter than the read (its visitor takes 2ms a record,
// as a consumer's work may: 2,400 records over 4.8s) gets every record
// once, in revision order.
func TestHistoryLongRead(t *testing.T) {
	ctx := bounded(t, 3*time.Minute)
	cfg := config(shared, newPrefix(), store.Feed{})
	w := open(t, cfg)
	type rec struct {
		rev uint64
		who string
	}
	var mu sync.Mutex
	var want []rec
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				who := fmt.Sprintf("w%d-%d", g, i)
				rev, err := w.Update(store.WithOrigin(ctx, store.Origin{Who: who}), func(tx store.Txn) error {
					return tx.Put(fmt.Sprintf("machine/m/w%d", g), []byte(fmt.Sprintf(`{"n":%d}`, i)))
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want = append(want, rec{rev, who})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	cmp := func(a, b rec) int {
		if a.rev != b.rev {
			return int(a.rev) - int(b.rev)
		}
		return strings.Compare(a.who, b.who)
	}
	slices.SortFunc(want, cmp)
	cfg.RequestTimeout = time.Second
	r := open(t, cfg)
	var got []rec
	for after := uint64(0); ; {
		last, more, err := r.History(ctx, after, 0, func(c store.Commit) error {
			got = append(got, rec{c.Rev, c.Origin.Who})
			time.Sleep(2 * time.Millisecond) // the consumer's work
			return nil
		})
		if err != nil {
			t.Fatalf("History after %d (read %d of %d records): %v", after, len(got), len(want), err)
		}
		after = last
		if !more {
			break
		}
	}
	if !slices.IsSortedFunc(got, func(a, b rec) int { return int(a.rev) - int(b.rev) }) {
		t.Fatal("records not in revision order")
	}
	slices.SortFunc(got, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records, want each of the %d committed once", len(got), len(want))
	}
}
