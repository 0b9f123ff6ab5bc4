package etcdstore_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/state/store/storetest"
)

// shared is the one-member etcd the tests of this binary share, each
// under its own prefix. Tests that stop etcd start their own.
var shared *etcdtest.Cluster

func TestMain(m *testing.M) {
	// This binary is also each member of the etcd clusters of processes
	// (TestMemberHung).
	if code, ok := etcdtest.MemberMain(os.Args[1:], os.Stderr); ok {
		os.Exit(code)
	}
	dir, err := os.MkdirTemp("", "etcdstore-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = etcdtest.Start(etcdtest.Options{Dir: dir, NoFsync: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		defer shared.Close()
		defer closeBench()
		return m.Run()
	}()
	if code == 0 {
		if err := leaktest.Check(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

var prefixes atomic.Int64

// newPrefix returns a prefix no other test of this binary uses.
func newPrefix() string { return fmt.Sprintf("/test-%d/", prefixes.Add(1)) }

// largeRequestTimeout is the request timeout of the tests that send
// requests of several MiB: under the race detector on a loaded box they
// can outlast config's 5 s (TestEtcdRefusesLarge and
// TestLargeRevisionReachesOtherStores each failed so in a full run); they
// test sizes, not speed.
const largeRequestTimeout = 40 * time.Second

// cluster is an etcd cluster of the tests: members in this process or in
// processes of their own.
type cluster interface {
	Endpoints() []string
	MaxTxnOps() int
	MaxRequestBytes() int
}

// config is a store's configuration for the cluster c under prefix.
func config(c cluster, prefix string, feed store.Feed) etcdstore.Config {
	return etcdstore.Config{
		Endpoints:       c.Endpoints(),
		Prefix:          prefix,
		Feed:            feed,
		MaxTxnOps:       c.MaxTxnOps(),
		MaxRequestBytes: c.MaxRequestBytes(),
		RequestTimeout:  5 * time.Second,
		LeaseTTL:        2 * time.Second,
	}
}

func open(t testing.TB, cfg etcdstore.Config) *etcdstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := etcdstore.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// stores remembers each store's prefix, for Reopen and Peer.
type stores struct {
	mu sync.Mutex
	of map[store.Store]string
}

func (ss *stores) open(t *testing.T, prefix string, feed store.Feed) store.Store {
	s := open(t, config(shared, prefix, feed))
	ss.mu.Lock()
	ss.of[s] = prefix
	ss.mu.Unlock()
	return s
}

func (ss *stores) prefix(s store.Store) string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.of[s]
}

func suite() storetest.Suite {
	ss := &stores{of: map[store.Store]string{}}
	return storetest.Suite{
		Open: func(t *testing.T, feed store.Feed) store.Store { return ss.open(t, newPrefix(), feed) },
		Reopen: func(t *testing.T, s store.Store, feed store.Feed) store.Store {
			return ss.open(t, ss.prefix(s), feed)
		},
		Peer: func(t *testing.T, s store.Store, feed store.Feed) store.Store {
			return ss.open(t, ss.prefix(s), feed)
		},
	}
}

func TestConformance(t *testing.T) { suite().Run(t) }

// TestConflictAfterAnotherPrefixWrites: an Update that conflicts when the
// cluster's latest revision is another prefix's (another controller on the
// same etcd) runs again and commits. It used to wait for that revision,
// which the watch of its own prefix never brings, and failed after
// RequestTimeout with "waiting for revision N".
func TestConflictAfterAnotherPrefixWrites(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	a := open(t, config(shared, prefix, store.Feed{}))
	peer := open(t, config(shared, prefix, store.Feed{}))
	other := open(t, config(shared, newPrefix(), store.Feed{}))
	ctx := context.Background()
	if _, err := a.Update(ctx, func(tx store.Txn) error { return tx.Put("k/x", []byte("0")) }); err != nil {
		t.Fatal(err)
	}
	runs := 0
	_, err := a.Update(ctx, func(tx store.Txn) error {
		runs++
		if _, _, err := tx.Get("k/x"); err != nil {
			return err
		}
		if runs == 1 {
			// What a read changes under it, and then a write elsewhere
			// moves the cluster's revision past it.
			if _, err := peer.Update(ctx, func(tx store.Txn) error { return tx.Put("k/x", []byte("1")) }); err != nil {
				return err
			}
			if _, err := other.Update(ctx, func(tx store.Txn) error { return tx.Put("k/y", []byte("1")) }); err != nil {
				return err
			}
		}
		return tx.Put("k/x", []byte("2"))
	})
	if err != nil {
		t.Fatalf("conflicting Update: %v (after %d runs)", err, runs)
	}
	if runs != 2 {
		t.Errorf("%d runs, want 2", runs)
	}
}
