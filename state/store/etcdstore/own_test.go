package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/state/store/storetest"
	"github.com/provisiond/provisiond/watcher"
)

// TestOwnCommitsAppliedAsTheWatchWould: two stores on one prefix write,
// alone and in groups, puts and deletes, of their own keys and of a shared
// counter. A store applies a commit of its own to its replica itself when
// it is the revision after the latest applied (Stats.OwnApplied), and the
// watch brings the others. Both feeds must then hold the same change sets
// at the same revisions, each acknowledged change once, and both replicas
// the records etcd has (keys and values at their revision); the counter,
// whose compares use the mod revisions an own apply set, loses no
// increment.
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
	cli := clientFor(t, shared.Endpoints())
	sameAsEtcd(t, ctx, a, cli, prefix)
	sameAsEtcd(t, ctx, b, cli, prefix)
	sa, sb := a.Stats(), b.Stats()
	if sa.OwnApplied+sb.OwnApplied == 0 {
		t.Errorf("no commit applied by its own Update: a %+v; b %+v", sa, sb)
	}
	t.Logf("a %+v; b %+v", sa, sb)
}

// TestCatchUpAfterAway cuts a store off (its only endpoint, one member of
// three, stops) while another tool puts 1,500 keys, a revision each. When
// the member is back, etcd sends the watch's catch-up in batches of at most
// 1,000 revisions, each with the cluster's current revision in its header:
// the store must apply every revision of every batch (not take a header
// for what it has applied), hand each to the feed once, and, applying its
// own commits after it, stay equal to etcd.
func TestCatchUpAfterAway(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	ctx := bounded(t, 3*time.Minute)
	rec := storetest.NewRecorder()
	cfg := config(c, "/away/", rec.Feed())
	cfg.Endpoints = []string{c.Members()[0].ClientURL}
	cfg.RequestTimeout = 5 * time.Second
	a := open(t, cfg)
	if _, err := a.Update(ctx, func(tx store.Txn) error { return tx.Put("machine/before", []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	others := []string{c.Members()[1].ClientURL, c.Members()[2].ClientURL}
	cli := clientFor(t, others)
	const away, putters = 1500, 8
	var wg sync.WaitGroup
	for g := range putters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < away; i += putters {
				if _, err := cli.Put(ctx, fmt.Sprintf("/away/machine/away-%04d", i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	resp, err := cli.Get(ctx, "/away/machine/before")
	if err != nil {
		t.Fatal(err)
	}
	awayRev := uint64(resp.Header.Revision)
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitApplied(ctx, awayRev); err != nil {
		t.Fatal(err)
	}
	// Its own commits after the catch-up, applied as it sends them.
	for i := range 20 {
		if _, err := a.Update(ctx, func(tx store.Txn) error {
			tx.Record(watcher.Change{Kind: "machine", ID: "after" + strconv.Itoa(i)})
			return tx.Put("machine/after-"+strconv.Itoa(i%4), []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	created := 0
	for _, cs := range rec.Sets() {
		for _, ch := range cs.Changes {
			if strings.HasPrefix(ch.ID, "away-") && ch.Has(watcher.FieldCreated) {
				created++
			}
		}
	}
	if created != away {
		t.Errorf("the feed has %d of the %d keys put while away", created, away)
	}
	rec.Check(t)
	sameAsEtcd(t, ctx, a, cli, "/away/")
	if len(rec.Resets()) != 0 {
		t.Errorf("resets %v: nothing was compacted", rec.Resets())
	}
	t.Logf("stats %+v", a.Stats())
}

// sameAsEtcd fails t unless s's replica holds exactly the records etcd has
// under prefix at s's revision (its own meta keys aside).
func sameAsEtcd(t *testing.T, ctx context.Context, s *etcdstore.Store, cli *clientv3.Client, prefix string) {
	t.Helper()
	rev := s.Revision()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(int64(rev)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, kv := range resp.Kvs {
		if k := strings.TrimPrefix(string(kv.Key), prefix); store.Kind(k) != store.MetaKind {
			want[k] = string(kv.Value)
		}
	}
	got := map[string]string{}
	err = s.View(ctx, func(r store.Reader) error {
		for _, kind := range []string{"machine/", "serial/", "own/", "counter/"} {
			start := ""
			for {
				last, more, err := r.Scan(kind, start, 0, func(k string, v []byte) error {
					got[k] = string(v)
					return nil
				})
				if err != nil || !more {
					break
				}
				start = last
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		missing, extra := 0, 0
		for k := range want {
			if _, ok := got[k]; !ok {
				missing++
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				extra++
			}
		}
		t.Errorf("at revision %d the replica has %d records, etcd %d: %d missing, %d extra, or values differ",
			rev, len(got), len(want), missing, extra)
	}
}
