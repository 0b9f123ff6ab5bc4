package etcdstore_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/state/store/storetest"
	"github.com/provisiond/provisiond/watcher"
)

// groupConfig is a store whose Updates queue as soon as one commit is in
// flight, so that concurrent writers share transactions.
func groupConfig(prefix string, feed store.Feed) etcdstore.Config {
	cfg := config(shared, prefix, feed)
	cfg.CommitsInFlight = 1
	cfg.RequestTimeout = 30 * time.Second // a loaded 2-core box
	return cfg
}

// run starts n goroutines at once, each calling fn(g), and waits for them.
func run(n int, fn func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(g)
		}()
	}
	close(start)
	wg.Wait()
}

// changeIDs counts each change's id over the change sets, with the
// revision it came at, failing t on a change at a revision other than the
// one its Update was acknowledged with.
func changeIDs(t *testing.T, sets []watcher.ChangeSet, acked map[string]uint64) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, cs := range sets {
		for _, c := range cs.Changes {
			seen[c.ID]++
			if rev, ok := acked[c.ID]; ok && rev != cs.Rev {
				t.Errorf("change %s at revision %d, its Update acknowledged at %d", c.ID, cs.Rev, rev)
			}
		}
	}
	return seen
}

// TestGroupCommit: writers of keys of their own through one store share
// etcd transactions, and each write's change reaches the feed once, at the
// revision its Update returned. ObserveCommit is told of every transaction
// and of the Updates each committed.
func TestGroupCommit(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	rec := storetest.NewRecorder()
	cfg := groupConfig(newPrefix(), rec.Feed())
	var observed struct {
		sync.Mutex
		txns, writes, most int
		zero               bool
	}
	cfg.ObserveCommit = func(d time.Duration, n int) {
		observed.Lock()
		defer observed.Unlock()
		observed.txns++
		observed.writes += n
		observed.most = max(observed.most, n)
		observed.zero = observed.zero || d <= 0 || n <= 0
	}
	s := open(t, cfg)
	const writers, each = 64, 10
	var mu sync.Mutex
	acked := map[string]uint64{}
	run(writers, func(g int) {
		for i := range each {
			id := fmt.Sprintf("%d-%d", g, i)
			rev, err := s.Update(ctx, func(tx store.Txn) error {
				if _, _, err := tx.Get("machine/" + strconv.Itoa(g)); err != nil {
					return err
				}
				tx.Record(watcher.Change{Kind: "machine", ID: id})
				return tx.Put("machine/"+strconv.Itoa(g), []byte(id))
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acked[id] = rev
			mu.Unlock()
		}
	})
	st := s.Stats()
	if st.Groups == 0 || st.Grouped < 2*st.Groups {
		t.Errorf("stats %+v: no Updates went together", st)
	}
	seen := changeIDs(t, rec.Sets(), acked)
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("change %s reached the feed %d times", id, seen[id])
		}
	}
	if len(seen) != writers*each {
		t.Errorf("%d changes in the feed, want %d", len(seen), writers*each)
	}
	rec.Check(t)
	observed.Lock()
	if observed.writes != writers*each || observed.most < 2 || observed.zero {
		t.Errorf("ObserveCommit told of %d transactions, %d writes (want %d), at most %d in one (want more than 1), a zero duration or count: %v",
			observed.txns, observed.writes, writers*each, observed.most, observed.zero)
	}
	if lone := observed.txns - int(st.Groups); lone+int(st.Grouped) != writers*each {
		t.Errorf("ObserveCommit's %d transactions are %d lone commits and %d groups of %d Updates, want %d Updates",
			observed.txns, lone, st.Groups, st.Grouped, writers*each)
	}
	observed.Unlock()
	t.Logf("%d Updates, %d transactions carried %d of them", writers*each, st.Groups, st.Grouped)
}

// TestGroupSerializable: Updates that depend on each other never share a
// transaction (etcd checks every compare of one before applying any of its
// writes). Increments of one counter lose nothing, and of two writers that
// each write their key only if neither key exists (write skew), one wins.
func TestGroupSerializable(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	s := open(t, groupConfig(newPrefix(), store.Feed{}))
	const pairs = 32
	var incremented atomic.Int64
	run(2*pairs, func(g int) {
		p, mine := g/2, fmt.Sprintf("skew/%d-%d", g/2, g%2)
		_, err := s.Update(ctx, func(tx store.Txn) error {
			for k := range 2 {
				if _, ok, err := tx.Get(fmt.Sprintf("skew/%d-%d", p, k)); err != nil || ok {
					return err
				}
			}
			return tx.Put(mine, []byte("won"))
		})
		if err != nil {
			t.Error(err)
		}
		for range 5 {
			// Many writers of one key may give up (ErrContention, having
			// written nothing): what counts is that no increment is lost.
			switch _, err := s.Update(ctx, incr("counter/c", "c")); {
			case err == nil:
				incremented.Add(1)
			case !errors.Is(err, store.ErrContention):
				t.Error(err)
			}
		}
	})
	for p := range pairs {
		won := 0
		for k := range 2 {
			if _, ok := get(t, ctx, s, fmt.Sprintf("skew/%d-%d", p, k)); ok {
				won++
			}
		}
		if won != 1 {
			t.Errorf("pair %d: %d writers won, want 1", p, won)
		}
	}
	if n := counter(t, ctx, s, "counter/c"); int64(n) != incremented.Load() {
		t.Errorf("counter %d, want %d", n, incremented.Load())
	}
	t.Logf("stats %+v", s.Stats())
}

// TestGroupMemberConflicts: two stores increment one counter. A member of
// a group whose compares fail (the other store committed first) writes
// nothing and its change set is not in the feed; it runs again.
func TestGroupMemberConflicts(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	prefix := newPrefix()
	rec := storetest.NewRecorder()
	a := open(t, groupConfig(prefix, rec.Feed()))
	b := open(t, groupConfig(prefix, store.Feed{}))
	const writers, each = 16, 5
	var mu sync.Mutex
	acked := map[string]uint64{}
	run(2*writers, func(g int) {
		s := a
		if g%2 == 1 {
			s = b
		}
		for i := range each {
			id := fmt.Sprintf("%d-%d", g, i)
			// Each writer increments the shared counter and its own key.
			rev, err := s.Update(ctx, func(tx store.Txn) error {
				if err := incr("counter/c", id)(tx); err != nil {
					return err
				}
				return tx.Put("own/"+strconv.Itoa(g), []byte(id))
			})
			if errors.Is(err, store.ErrContention) {
				continue // gave up, wrote nothing
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acked[id] = rev
			mu.Unlock()
		}
	})
	last := uint64(0)
	for _, rev := range acked {
		last = max(last, rev)
	}
	if err := a.WaitApplied(ctx, last); err != nil {
		t.Fatal(err)
	}
	if n := counter(t, ctx, a, "counter/c"); n != len(acked) {
		t.Errorf("counter %d, want %d", n, len(acked))
	}
	seen := changeIDs(t, rec.Sets(), acked)
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("change %s reached a's feed %d times", id, seen[id])
		}
	}
	rec.Check(t)
	t.Logf("a %+v; b %+v", a.Stats(), b.Stats())
}

// TestGroupRefusedFallsBack: a store told a larger MaxTxnOps than etcd's
// groups Updates etcd then refuses as one transaction (a nested one may
// have only etcd's limit less the outer's count); each goes on its own.
func TestGroupRefusedFallsBack(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	cfg := groupConfig(newPrefix(), store.Feed{})
	cfg.MaxTxnOps = 2 * shared.MaxTxnOps()
	s := open(t, cfg)
	n := shared.MaxTxnOps() - 2 // alone, with the feed put: within etcd's limit
	run(4, func(g int) {
		_, err := s.Update(ctx, func(tx store.Txn) error {
			for k := range n {
				if err := tx.Put(fmt.Sprintf("big/%d-%d", g, k), []byte("v")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	for g := range 4 {
		if _, ok := get(t, ctx, s, fmt.Sprintf("big/%d-%d", g, n-1)); !ok {
			t.Errorf("writer %d's keys missing", g)
		}
	}
}

// TestGroupWithinLimits: writers of many keys each, through a store told
// a MaxTxnOps below etcd's, share transactions within it: all commit.
func TestGroupWithinLimits(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	cfg := groupConfig(newPrefix(), store.Feed{})
	cfg.MaxTxnOps = 64
	s := open(t, cfg)
	run(16, func(g int) {
		for i := range 4 {
			_, err := s.Update(ctx, func(tx store.Txn) error {
				for k := range 20 {
					if err := tx.Put(fmt.Sprintf("many/%d-%d", g, k), []byte(strconv.Itoa(i))); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	for g := range 16 {
		if v, _ := get(t, ctx, s, fmt.Sprintf("many/%d-19", g)); string(v) != "3" {
			t.Errorf("writer %d: last key %q, want 3", g, v)
		}
	}
	t.Logf("stats %+v", s.Stats())
}
