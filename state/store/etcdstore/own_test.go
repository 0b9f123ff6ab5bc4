package etcdstore_test

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/storetest"
	"github.com/provisiond/provisiond/watcher"
)

// TestOwnCommitsAppliedAsTheWatchWould: two stores on one prefix write,
// alone and in groups, puts and deletes, of their own keys and of a shared
// counter. A store applies a commit of its own to its replica itself when
// it is the revision after the latest applied (Stats.OwnApplied), and the
// watch brings the others. Both feeds must then hold the same change sets
// at the same revisions, each acknowledged change once, and both replicas
// the same records; the counter, whose compares use the mod revisions an
// own apply set, loses no increment.
func TestOwnCommitsAppliedAsTheWatchWould(t *testing.T) {
	ctx := bounded(t, 2*time.Minute)
	prefix := newPrefix()
	recA, recB := storetest.NewRecorder(), storetest.NewRecorder()
	a := open(t, groupConfig(prefix, recA.Feed()))
	cfgB := config(shared, prefix, recB.Feed()) // lone commits: 4 in flight
	cfgB.RequestTimeout = 30 * time.Second
	b := open(t, cfgB)
	// Serial writes through one store first: nothing else is committed,
	// so each is the revision after the latest applied, unless the watch
	// delivered it first.
	for i := range 50 {
		if _, err := a.Update(ctx, func(tx store.Txn) error {
			tx.Record(watcher.Change{Kind: "serial", ID: strconv.Itoa(i)})
			return tx.Put("serial/"+strconv.Itoa(i%5), []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.OwnApplied == 0 {
		t.Errorf("50 serial Updates through one store: none applied by its Update (%+v)", st)
	}
	const writers, each = 8, 10
	var mu sync.Mutex
	acked := map[string]uint64{}
	var increments int
	run(2*writers, func(g int) {
		s := a
		if g%2 == 1 {
			s = b
		}
		for i := range each {
			id := fmt.Sprintf("%d-%d", g, i)
			rev, err := s.Update(ctx, func(tx store.Txn) error {
				tx.Record(watcher.Change{Kind: "own", ID: id})
				if i%3 == 2 {
					return tx.Delete("own/" + strconv.Itoa(g))
				}
				return tx.Put("own/"+strconv.Itoa(g), []byte(id))
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			acked[id] = rev
			mu.Unlock()
			if i%4 == 0 {
				switch _, err := s.Update(ctx, incr("counter/c", "c"+id)); {
				case err == nil:
					mu.Lock()
					increments++
					mu.Unlock()
				case !errors.Is(err, store.ErrContention):
					t.Error(err)
				}
			}
		}
	})
	last := max(a.Revision(), b.Revision())
	for _, s := range []store.Store{a, b} {
		if err := s.WaitApplied(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	setsA, setsB := recA.Sets(), recB.Sets()
	if !reflect.DeepEqual(setsA, setsB) {
		t.Errorf("the feeds differ: a has %d change sets, b %d", len(setsA), len(setsB))
		for i := range min(len(setsA), len(setsB)) {
			if !reflect.DeepEqual(setsA[i], setsB[i]) {
				t.Errorf("first difference: a %+v, b %+v", setsA[i], setsB[i])
				break
			}
		}
	}
	for _, sets := range [][]watcher.ChangeSet{setsA, setsB} {
		seen := changeIDs(t, sets, acked)
		for id := range acked {
			if seen[id] != 1 {
				t.Errorf("change %s reached a feed %d times", id, seen[id])
			}
		}
	}
	if n := counter(t, ctx, a, "counter/c"); n != increments {
		t.Errorf("counter %d, want %d", n, increments)
	}
	for g := range 2 * writers {
		key := "own/" + strconv.Itoa(g)
		va, oka := get(t, ctx, a, key)
		vb, okb := get(t, ctx, b, key)
		if oka != okb || string(va) != string(vb) {
			t.Errorf("%s: a has %q (%v), b %q (%v)", key, va, oka, vb, okb)
		}
	}
	recA.Check(t)
	recB.Check(t)
	sa, sb := a.Stats(), b.Stats()
	if sa.OwnApplied+sb.OwnApplied == 0 {
		t.Errorf("no commit applied by its own Update: a %+v; b %+v", sa, sb)
	}
	t.Logf("a %+v; b %+v", sa, sb)
}
