package state_test

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
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// The state tests are one conformance suite of both stores: `go test
// ./state/` runs them on bbolt (a file per test), and with
// PROVISIOND_TEST_STORE=etcd (make test runs both) every test that opens
// its state through statetest runs on a real one-member etcd embedded in
// the test binary, under a prefix of its own. The tests that race several
// States on one store (the decisions two daemons must not contradict) use
// etcd whichever store the suite runs on.
const storeEnv = "PROVISIOND_TEST_STORE"

func TestMain(m *testing.M) {
	switch os.Getenv(storeEnv) {
	case "", "bbolt":
	case "etcd":
		statetest.Store = func(t testing.TB) func(store.Feed) (store.Store, error) {
			return etcdStore(t, sharedEtcd(t), newPrefix())
		}
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want bbolt or etcd\n", storeEnv, os.Getenv(storeEnv))
		os.Exit(2)
	}
	code := m.Run()
	closeEtcd()
	if code == 0 {
		if err := leaktest.Check(leaktest.Grace); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// The one etcd of this test binary, started by the first test that needs
// it and closed by TestMain.
var (
	etcdOnce    sync.Once
	etcdCluster *etcdtest.Cluster
	etcdDir     string
	etcdErr     error
	prefixes    atomic.Int64
)

func sharedEtcd(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	etcdOnce.Do(func() {
		etcdDir, etcdErr = os.MkdirTemp("", "state-test-etcd-")
		if etcdErr == nil {
			etcdCluster, etcdErr = etcdtest.Start(etcdtest.Options{Dir: etcdDir, NoFsync: true})
		}
	})
	if etcdErr != nil {
		t.Fatalf("starting etcd: %v", etcdErr)
	}
	return etcdCluster
}

func closeEtcd() {
	if etcdCluster != nil {
		etcdCluster.Close()
	}
	if etcdDir != "" {
		os.RemoveAll(etcdDir)
	}
}

// newPrefix returns an etcd prefix no other test of this binary uses.
func newPrefix() string { return fmt.Sprintf("/state-test-%d/", prefixes.Add(1)) }

// etcdStore opens a store on c under prefix (statetest.OpenStore),
// closed (if state has not closed it) when the test ends.
func etcdStore(t testing.TB, c *etcdtest.Cluster, prefix string) func(store.Feed) (store.Store, error) {
	return etcdStoreOps(t, c, prefix, c.MaxTxnOps())
}

// etcdStoreOps is etcdStore with a store told that etcd allows maxOps
// operations per transaction.
func etcdStoreOps(t testing.TB, c *etcdtest.Cluster, prefix string, maxOps int) func(store.Feed) (store.Store, error) {
	return func(feed store.Feed) (store.Store, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := etcdstore.Open(ctx, etcdstore.Config{
			Endpoints:       c.Endpoints(),
			Prefix:          prefix,
			Feed:            feed,
			MaxTxnOps:       maxOps,
			MaxRequestBytes: c.MaxRequestBytes(),
			RequestTimeout:  10 * time.Second,
			LeaseTTL:        2 * time.Second,
		})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.Close() })
		return s, nil
	}
}

// etcdStates opens n States on one new prefix of the shared etcd, as n
// daemons of one controller: the first initializes it (statetest's
// InitArgs), the others open it once it is. Each is closed when the test
// ends.
func etcdStates(t *testing.T, n int) []*state.State {
	t.Helper()
	c, prefix := sharedEtcd(t), newPrefix()
	sts := make([]*state.State, n)
	for i := range sts {
		st, err := statetest.OpenStore(etcdStore(t, c, prefix), state.Options{})
		if err != nil {
			t.Fatalf("opening state %d on etcd: %v", i, err)
		}
		t.Cleanup(func() { st.Close() })
		if i == 0 {
			if _, err := st.Initialize(t.Context(), statetest.InitArgs()); err != nil {
				t.Fatal(err)
			}
		}
		sts[i] = st
	}
	return sts
}

// revisionsAfter reports whether st's revision is what n commits after
// before make: exactly before+n on bbolt, whose revision is the state's
// own; more than before on etcd, whose revision is the cluster's, which
// the other tests' prefixes move too.
func revisionsAfter(st *state.State, before uint64, n int) bool {
	if st.Store().Info().Engine == "etcd" {
		return st.Revision() > before || n == 0 && st.Revision() == before
	}
	return st.Revision() == before+uint64(n)
}
