package etcdstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/state/store/storetest"
	"github.com/provisiond/provisiond/watcher"
)

func bounded(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func incr(key string, id string) func(store.Txn) error {
	return func(tx store.Txn) error {
		v, _, err := tx.Get(key)
		if err != nil {
			return err
		}
		n := 0
		if len(v) > 0 {
			n, _ = strconv.Atoi(string(v))
		}
		tx.Record(watcher.Change{Kind: "counter", ID: id})
		return tx.Put(key, []byte(strconv.Itoa(n+1)))
	}
}

func counter(t *testing.T, ctx context.Context, s store.Store, key string) int {
	t.Helper()
	var n int
	err := s.View(ctx, func(r store.Reader) error {
		v, _, err := r.Get(key)
		if len(v) > 0 {
			n, _ = strconv.Atoi(string(v))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkFeed fails t unless every acknowledged revision reached rec.
func checkFeed(t *testing.T, rec *storetest.Recorder, acked []uint64) {
	t.Helper()
	for _, rev := range acked {
		if _, ok := rec.Set(rev); !ok {
			t.Errorf("acknowledged revision %d missing from the feed", rev)
		}
	}
	rec.Check(t)
}

// TestKillLeader kills the etcd leader of three members while writers
// commit through the store: nothing acknowledged is lost, the calls that
// failed meanwhile failed with ErrUnavailable, and writes resume.
func TestKillLeader(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	rec := storetest.NewRecorder()
	cfg := config(c, "/kill/", rec.Feed())
	cfg.RequestTimeout = 3 * time.Second
	s := open(t, cfg)
	ctx := bounded(t, 2*time.Minute)

	const writers, before, after = 4, 10, 10
	type tally struct {
		acked, ambiguous int
		revs             []uint64
	}
	tallies := make([]tally, writers)
	var wg sync.WaitGroup
	var killed sync.WaitGroup
	killed.Add(1)
	var phase1 sync.WaitGroup
	phase1.Add(writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tl := &tallies[w]
			key := fmt.Sprintf("counter/%d", w)
			waited := false
			for tl.acked < before+after {
				if tl.acked == before && !waited {
					waited = true
					phase1.Done()
					killed.Wait()
				}
				rev, err := s.Update(ctx, incr(key, strconv.Itoa(w)))
				switch {
				case err == nil:
					tl.acked++
					tl.revs = append(tl.revs, rev)
				case errors.Is(err, store.ErrUnavailable):
					tl.ambiguous++ // may or may not have committed
				case ctx.Err() != nil:
					t.Errorf("writer %d: no progress: %v", w, err)
					return
				default:
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	phase1.Wait()
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(lead)
	killed.Done()
	wg.Wait()
	var acked []uint64
	for w, tl := range tallies {
		n := counter(t, ctx, s, fmt.Sprintf("counter/%d", w))
		if n < tl.acked || n > tl.acked+tl.ambiguous {
			t.Errorf("writer %d: counter %d, acknowledged %d, ambiguous %d", w, n, tl.acked, tl.ambiguous)
		}
		acked = append(acked, tl.revs...)
	}
	checkFeed(t, rec, acked)
	// A second process reading from the members left sees the same.
	peer := open(t, config(c, "/kill/", store.Feed{}))
	for w := range writers {
		key := fmt.Sprintf("counter/%d", w)
		if a, b := counter(t, ctx, s, key), counter(t, ctx, peer, key); a != b {
			t.Errorf("%s: %d here, %d in a new store", key, a, b)
		}
	}
}

// waitFor polls cond, a check of the store's state from outside, until it
// holds or ctx ends (no event to wait on tells a caller that etcd went).
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestEtcdDown stops the only etcd member: every call fails with
// ErrUnavailable within the store's bounds (reads once the replica is no
// longer known current); when etcd is back the store recovers by itself
// and its feed has every acknowledged commit.
func TestEtcdDown(t *testing.T) {
	c := etcdtest.New(t)
	rec := storetest.NewRecorder()
	cfg := config(c, "/down/", rec.Feed())
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	cfg.RequestTimeout = time.Second
	cfg.StaleAfter = time.Second
	s := open(t, cfg)
	ctx := bounded(t, time.Minute)
	var acked []uint64
	for range 5 {
		rev, err := s.Update(ctx, incr("counter/x", "x"))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, rev)
	}
	c.Stop(0)
	if _, err := s.Update(ctx, incr("counter/x", "x")); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Update with etcd down: %v", err)
	}
	if err := s.Health(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Health with etcd down: %v", err)
	}
	if err := s.Sync(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Sync with etcd down: %v", err)
	}
	waitFor(t, ctx, "reads to fail", func() bool {
		err := s.View(ctx, func(store.Reader) error { return nil })
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("View with etcd down: %v", err)
		}
		return err != nil
	})
	if _, err := s.Ephemeral(ctx, "apiaddr/x", nil); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ephemeral with etcd down: %v", err)
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "writes to work again", func() bool {
		rev, err := s.Update(ctx, incr("counter/x", "x"))
		if err == nil {
			acked = append(acked, rev)
		}
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Update after restart: %v", err)
		}
		return err == nil
	})
	for range 5 {
		rev, err := s.Update(ctx, incr("counter/x", "x"))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, rev)
	}
	if err := s.Health(ctx); err != nil {
		t.Errorf("Health after restart: %v", err)
	}
	// Sync's linearizable read has one RequestTimeout (1 s here): on a
	// busy machine a member just restarted may miss it once (CI saw it);
	// unavailable is the answer it promises then, and it must come back.
	waitFor(t, ctx, "Sync to work again", func() bool {
		err := s.Sync(ctx)
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Sync after restart: %v", err)
		}
		return err == nil
	})
	if n := counter(t, ctx, s, "counter/x"); n != len(acked) {
		t.Errorf("counter %d after %d acknowledged increments (the one tried while down did not commit)", n, len(acked))
	}
	checkFeed(t, rec, acked)
	if len(rec.Resets()) != 0 {
		t.Errorf("Reset without compaction: %v", rec.Resets())
	}
}

// TestCompactedWhileAway cuts a store off (its only endpoint, one member of
// three, stops) while another writes and compacts history: when the member
// is back, the store's watch finds its revision compacted, reloads, calls
// Reset once, and misses nothing after it.
func TestCompactedWhileAway(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	ctx := bounded(t, 2*time.Minute)
	rec := storetest.NewRecorder()
	cfg := config(c, "/compact/", rec.Feed())
	cfg.Endpoints = []string{c.Members()[0].ClientURL}
	cfg.RequestTimeout = 2 * time.Second
	cfg.StaleAfter = time.Second
	a := open(t, cfg)
	others := config(c, "/compact/", store.Feed{})
	others.Endpoints = []string{c.Members()[1].ClientURL, c.Members()[2].ClientURL}
	b := open(t, others)
	rev0, err := a.Update(ctx, func(tx store.Txn) error { return tx.Put("machine/m/0", []byte("before")) })
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	var revs []uint64
	for i := range 10 {
		rev, err := b.Update(ctx, func(tx store.Txn) error {
			tx.Record(watcher.Change{Kind: "machine", ID: strconv.Itoa(i)})
			return tx.Put("machine/m/"+strconv.Itoa(i), []byte("while away"))
		})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, rev)
	}
	cli := clientFor(t, others.Endpoints)
	if _, err := cli.Compact(ctx, int64(revs[len(revs)-1])); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	if err := rec.WaitFor(ctx, func(_ []watcher.ChangeSet, resets []uint64) bool { return len(resets) > 0 }); err != nil {
		t.Fatal("no Reset after compaction")
	}
	resets := rec.Resets()
	if len(resets) != 1 || resets[0] < revs[len(revs)-1] || resets[0] <= rev0 {
		t.Errorf("resets %v, compacted at %d", resets, revs[len(revs)-1])
	}
	if n := a.Stats().Resets; n != 1 {
		t.Errorf("Stats().Resets = %d", n)
	}
	// The replica holds what was written while away.
	if err := a.WaitApplied(ctx, revs[len(revs)-1]); err != nil {
		t.Fatal(err)
	}
	err = a.View(ctx, func(r store.Reader) error {
		for i := range 10 {
			if v, _, _ := r.Get("machine/m/" + strconv.Itoa(i)); string(v) != "while away" {
				t.Errorf("machine/m/%d = %q after the reload", i, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing after the Reset is missed.
	var after []uint64
	for i := range 5 {
		rev, err := b.Update(ctx, func(tx store.Txn) error {
			tx.Record(watcher.Change{Kind: "machine", ID: "after" + strconv.Itoa(i)})
			return tx.Put("machine/m/after"+strconv.Itoa(i), []byte("v"))
		})
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, rev)
	}
	if err := a.WaitApplied(ctx, after[len(after)-1]); err != nil {
		t.Fatal(err)
	}
	checkFeed(t, rec, after)
}

func clientFor(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestGuardCompare: a transaction reading more keys than MaxTxnOps allows
// compares is guarded by the feed key, and still loses no update.
func TestGuardCompare(t *testing.T) {
	cfg := config(shared, newPrefix(), store.Feed{})
	cfg.MaxTxnOps = 16
	s := open(t, cfg)
	ctx := bounded(t, time.Minute)
	if _, err := s.Update(ctx, func(tx store.Txn) error {
		for i := range 15 {
			if err := tx.Put(fmt.Sprintf("other/%02d", i), []byte("x")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 4, 10
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := s.Update(ctx, func(tx store.Txn) error {
					// 15 keys scanned and 1 read: 17 compares, over 16.
					if _, _, err := tx.Scan("other/", "", 0, func(string, []byte) error { return nil }); err != nil {
						return err
					}
					return incr("counter/shared", "")(tx)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := counter(t, ctx, s, "counter/shared"); n != workers*each {
		t.Errorf("counter %d, want %d", n, workers*each)
	}
	// Too many writes fail before being sent.
	_, err := s.Update(ctx, func(tx store.Txn) error {
		for i := range 16 {
			tx.Put(fmt.Sprintf("other/%02d", i), []byte("y"))
		}
		return nil
	})
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "--max-txn-ops") {
		t.Errorf("16 writes with MaxTxnOps 16: %v", err)
	}
}

// TestEtcdRefusesLarge: a store told larger limits than etcd has gets
// etcd's refusal as ErrTooLarge naming etcd's flags.
func TestEtcdRefusesLarge(t *testing.T) {
	cfg := config(shared, newPrefix(), store.Feed{})
	cfg.MaxTxnOps = 4 * shared.MaxTxnOps()
	cfg.MaxRequestBytes = 4 * shared.MaxRequestBytes()
	cfg.RequestTimeout = largeRequestTimeout
	s := open(t, cfg)
	ctx := bounded(t, time.Minute)
	_, err := s.Update(ctx, func(tx store.Txn) error {
		for i := range shared.MaxTxnOps() + 10 {
			tx.Put(fmt.Sprintf("k/%05d", i), []byte("v"))
		}
		return nil
	})
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "--max-txn-ops") {
		t.Errorf("too many operations for etcd: %v", err)
	}
	_, err = s.Update(ctx, func(tx store.Txn) error {
		return tx.Put("k/big", make([]byte, shared.MaxRequestBytes()+1<<20))
	})
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Errorf("a request too large for etcd: %v", err)
	}
	if _, err := s.Update(ctx, func(tx store.Txn) error { return tx.Put("k/small", nil) }); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
}

// TestLeaseLost revokes the store's lease behind its back (as its expiry
// would): the leadership ends, the ephemeral key goes, and the store puts
// it back under a new lease.
func TestLeaseLost(t *testing.T) {
	prefix := newPrefix()
	rec := storetest.NewRecorder()
	s := open(t, config(shared, prefix, rec.Feed()))
	ctx := bounded(t, time.Minute)
	if _, err := s.Ephemeral(ctx, "apiaddr/me", []byte("addr")); err != nil {
		t.Fatal(err)
	}
	leading, resign, err := s.Elect(ctx, "timers")
	if err != nil {
		t.Fatal(err)
	}
	defer resign()
	cli := clientFor(t, shared.Endpoints())
	resp, err := cli.Get(ctx, prefix+"apiaddr/me")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("ephemeral key in etcd: %v, %v", resp, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leading.Done():
	case <-ctx.Done():
		t.Fatal("leading context not cancelled when the lease went")
	}
	// Removed (derived from the lease's revocation), then created again.
	if err := rec.WaitFor(ctx, func(sets []watcher.ChangeSet, _ []uint64) bool {
		removed := false
		for _, cs := range sets {
			for _, c := range cs.Changes {
				if c.Kind == "apiaddr" && c.ID == "me" {
					if c.Has(watcher.FieldRemoved) {
						removed = true
					} else if removed && c.Has(watcher.FieldCreated) {
						return true
					}
				}
			}
		}
		return false
	}); err != nil {
		t.Fatalf("ephemeral key not removed and put back: %+v", rec.Sets())
	}
	if s.Stats().LeaseLosses != 1 {
		t.Errorf("lease losses %d", s.Stats().LeaseLosses)
	}
	// A new campaign works under the new lease.
	resign()
	l2, r2, err := s.Elect(ctx, "timers")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Err() != nil {
		t.Error("new leadership already over")
	}
	r2()
}

func TestConfig(t *testing.T) {
	ctx := bounded(t, time.Minute)
	for _, cfg := range []etcdstore.Config{
		{},
		{Endpoints: shared.Endpoints(), Prefix: "no-slash"},
		{Endpoints: shared.Endpoints(), CertFile: "x"},
		{Endpoints: shared.Endpoints(), CAFile: "/nonexistent"},
	} {
		if s, err := etcdstore.Open(ctx, cfg); err == nil {
			s.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
	// Unreachable endpoints: Open fails with ErrUnavailable, in bounded time.
	cfg := etcdstore.Config{Endpoints: []string{"http://127.0.0.1:1"}, RequestTimeout: 500 * time.Millisecond, DialTimeout: 500 * time.Millisecond}
	if s, err := etcdstore.Open(ctx, cfg); !errors.Is(err, store.ErrUnavailable) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open of an unreachable etcd: %v", err)
	}
	// Election names that would nest are refused.
	s0 := open(t, config(shared, newPrefix(), store.Feed{}))
	for _, name := range []string{"", "a/b"} {
		if _, _, err := s0.Elect(ctx, name); err == nil {
			t.Errorf("Elect(%q) succeeded", name)
		}
	}
	// The default prefix.
	s := open(t, etcdstore.Config{Endpoints: shared.Endpoints()})
	if s.Prefix() != etcdstore.DefaultPrefix || s.Info().Engine != "etcd" {
		t.Errorf("prefix %q, info %+v", s.Prefix(), s.Info())
	}
}

// TestForeignWrites: revisions without a change set of ours (a write by
// another tool under the prefix) reach the feed as changes derived from
// their keys, and the replica has them.
func TestForeignWrites(t *testing.T) {
	prefix := newPrefix()
	rec := storetest.NewRecorder()
	s := open(t, config(shared, prefix, rec.Feed()))
	ctx := bounded(t, time.Minute)
	cli := clientFor(t, shared.Endpoints())
	want := []struct {
		op    func() (int64, error)
		field string
	}{
		{func() (int64, error) { return putRev(cli.Put(ctx, prefix+"machine/m/0", "v1")) }, watcher.FieldCreated},
		{func() (int64, error) { return putRev(cli.Put(ctx, prefix+"machine/m/0", "v2")) }, ""},
		{func() (int64, error) {
			r, err := cli.Delete(ctx, prefix+"machine/m/0")
			if err != nil {
				return 0, err
			}
			return r.Header.Revision, nil
		}, watcher.FieldRemoved},
	}
	for i, w := range want {
		r, err := w.op()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitApplied(ctx, uint64(r)); err != nil {
			t.Fatal(err)
		}
		cs, ok := rec.Set(uint64(r))
		if !ok || len(cs.Changes) != 1 {
			t.Fatalf("step %d: change set %+v, %v", i, cs, ok)
		}
		c := cs.Changes[0]
		if c.Kind != "machine" || c.ID != "m/0" || c.Model != "" || (w.field == "") != (len(c.Fields) == 0) || (w.field != "" && !c.Has(w.field)) {
			t.Errorf("step %d: derived %+v, want field %q", i, c, w.field)
		}
	}
	if _, ok := get(t, ctx, s, "machine/m/0"); ok {
		t.Error("the replica still has the key deleted by another tool")
	}
	// Writes of the meta kind by others reach neither the feed nor reads.
	r, err := cli.Put(ctx, prefix+"meta/other", "x")
	if err != nil {
		t.Fatal(err)
	}
	s.WaitApplied(ctx, uint64(r.Header.Revision))
	if _, ok := rec.Set(uint64(r.Header.Revision)); ok {
		t.Error("a meta write was applied")
	}
}

func putRev(r *clientv3.PutResponse, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return r.Header.Revision, nil
}

func get(t *testing.T, ctx context.Context, s store.Store, key string) ([]byte, bool) {
	t.Helper()
	var v []byte
	var ok bool
	if err := s.View(ctx, func(r store.Reader) error {
		var err error
		v, ok, err = r.Get(key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v, ok
}

// TestLargeRevisionReachesOtherStores: a commit near etcd's request limit
// (6 MiB of 8) reaches another store's replica through its watch, whose
// responses then exceed gRPC's default 4 MiB for a received message.
func TestLargeRevisionReachesOtherStores(t *testing.T) {
	prefix := newPrefix()
	slow := func(cfg etcdstore.Config) etcdstore.Config { cfg.RequestTimeout = largeRequestTimeout; return cfg }
	a := open(t, slow(config(shared, prefix, store.Feed{})))
	rec := storetest.NewRecorder()
	b := open(t, slow(config(shared, prefix, rec.Feed())))
	ctx := bounded(t, time.Minute)
	big := bytes.Repeat([]byte("v"), 6<<20)
	rev, err := a.Update(ctx, func(tx store.Txn) error {
		tx.Record(watcher.Change{Kind: "machine", ID: "big"})
		return tx.Put("machine/big", big)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WaitApplied(ctx, rev); err != nil {
		t.Fatalf("the other store never applied the large revision: %v (stats %+v)", err, b.Stats())
	}
	if v, _ := get(t, ctx, b, "machine/big"); len(v) != len(big) {
		t.Errorf("the other store holds %d bytes, want %d", len(v), len(big))
	}
	if _, ok := rec.Set(rev); !ok {
		t.Errorf("revision %d missing from the other store's feed", rev)
	}
}

// TestDepart: Depart revokes the store's lease in one request: a peer's
// feed shows the ephemeral key removed, the leadership ends, and nothing
// is put back or resigned after it (no lease loss counted); Ephemeral is
// refused, Elect waits for its context, releases do nothing; reads and
// Updates go on until Close.
func TestDepart(t *testing.T) {
	prefix := newPrefix()
	s := open(t, config(shared, prefix, store.Feed{}))
	rec := storetest.NewRecorder()
	open(t, config(shared, prefix, rec.Feed())) // a peer, watching
	ctx := bounded(t, time.Minute)
	release, err := s.Ephemeral(ctx, "apiaddr/me", []byte("addr"))
	if err != nil {
		t.Fatal(err)
	}
	leading, resign, err := s.Elect(ctx, "timers")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Depart(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leading.Done():
	case <-ctx.Done():
		t.Fatal("leading context not cancelled by Depart")
	}
	resign()
	release()
	if err := rec.WaitFor(ctx, func(sets []watcher.ChangeSet, _ []uint64) bool {
		for _, cs := range sets {
			for _, c := range cs.Changes {
				if c.Kind == "apiaddr" && c.ID == "me" && c.Has(watcher.FieldRemoved) {
					return true
				}
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the peer's feed does not show the ephemeral key removed: %+v", rec.Sets())
	}
	cli := clientFor(t, shared.Endpoints())
	if resp, err := cli.Get(ctx, prefix+"apiaddr/me"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("ephemeral key in etcd after Depart: %v, %v", resp, err)
	}
	if _, err := s.Ephemeral(ctx, "apiaddr/again", []byte("x")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ephemeral after Depart: %v, want ErrClosed", err)
	}
	ectx, ecancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ecancel()
	if _, _, err := s.Elect(ectx, "timers"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Elect after Depart: %v, want its context's end", err)
	}
	if _, err := s.Update(ctx, func(tx store.Txn) error { return tx.Put("machine/0", []byte("{}")) }); err != nil {
		t.Errorf("Update after Depart: %v", err)
	}
	if err := s.Depart(ctx); err != nil {
		t.Errorf("second Depart: %v", err)
	}
	if n := s.Stats().LeaseLosses; n != 0 {
		t.Errorf("lease losses %d after Depart, want 0 (the revoke is not a loss)", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDepartHung: Depart against a member that answers nothing returns
// once its context ends, saying the keys go when the lease expires; Close
// then does not wait out a revoke of its own.
func TestDepartHung(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.NewProcesses(t, self, 1)
	cfg := config(c, newPrefix(), store.Feed{})
	s := open(t, cfg)
	ctx := bounded(t, time.Minute)
	if _, err := s.Ephemeral(ctx, "apiaddr/me", []byte("addr")); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Resume(0) }()
	dctx, dcancel := context.WithTimeout(ctx, time.Second)
	defer dcancel()
	t0 := time.Now()
	err = s.Depart(dctx)
	if err == nil || !strings.Contains(err.Error(), "expires") {
		t.Errorf("Depart against a hung member: %v, want an error saying the keys go when the lease expires", err)
	}
	if took := time.Since(t0); took > 3*time.Second {
		t.Errorf("Depart took %s with a 1s context", took)
	}
	t1 := time.Now()
	_ = s.Close()
	if took := time.Since(t1); took >= cfg.RequestTimeout {
		t.Errorf("Close after a failed Depart took %s: it waited out a revoke of its own", took)
	}
}

// countKeys counts the keys of s's latest revision under prefix.
func countKeys(t *testing.T, ctx context.Context, s store.Store, prefix string) int {
	t.Helper()
	n := 0
	if err := s.View(ctx, func(r store.Reader) error {
		for last, more := "", true; more; {
			var err error
			last, more, err = r.Scan(prefix, last, 0, func(string, []byte) error { n++; return nil })
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
