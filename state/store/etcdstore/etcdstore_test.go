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

// config is a store's configuration for the cluster c under prefix.
func config(c *etcdtest.Cluster, prefix string, feed store.Feed) etcdstore.Config {
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
