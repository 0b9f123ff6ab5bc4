package crashtest_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/crashtest"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestCrashRecoveryEtcd is TestCrashRecovery with the daemon on etcd
// (--store etcd, one embedded member in this process, which outlives
// every kill): CRASH_CYCLES SIGKILL/restart cycles (default 50) under the
// same write load, checking after each kill, through a state opened on
// the prefix, that every acknowledged write is there and the revision did
// not go backwards, and after each restart that agents log in again and
// see the model in etcd.
func TestCrashRecoveryEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the daemon binary")
	}
	t.Parallel()
	cycles := envInt(t, "CRASH_CYCLES", 50)
	seed := uint64(envInt(t, "CRASH_SEED", int(time.Now().UnixNano()%1_000_000_000+1)))
	bin := build(t, "")
	cluster := etcdtest.New(t)
	const prefix = "/crash/"
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(cycles)*5*time.Second+time.Minute)
	defer cancel()

	res, err := crashtest.Run(ctx, crashtest.Config{
		Binary: bin, DataDir: filepath.Join(t.TempDir(), "data"), Cycles: cycles, Seed: seed, Logf: logf(t),
		// Logins take longer on etcd than on bbolt (about 100ms here):
		// kills later in a cycle keep most cycles acknowledging writes.
		MinKill: 50 * time.Millisecond, MaxKill: 500 * time.Millisecond,
		Etcd: &crashtest.Etcd{
			Endpoints: cluster.Endpoints(), Prefix: prefix,
			OpenState: openEtcdState(cluster, prefix),
			Args: []string{"--etcd-lease-ttl", "2s",
				"--etcd-max-txn-ops", strconv.Itoa(cluster.MaxTxnOps()),
				"--etcd-max-request-bytes", strconv.Itoa(cluster.MaxRequestBytes())},
		},
	})
	t.Logf("seed %d: %s", seed, res.Summary())
	var v *crashtest.Violation
	if errors.As(err, &v) {
		t.Fatalf("seed %d: %v\ndaemon log:\n%s", seed, v, v.Log)
	}
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	requireWorkload(t, res, cycles)
}

// openEtcdState opens the controller's state on the cluster's prefix, as
// a daemon would (without serving it).
func openEtcdState(c *etcdtest.Cluster, prefix string) func() (*state.State, error) {
	return func() (*state.State, error) {
		return state.Open(state.Options{OpenStore: func(feed store.Feed) (store.Store, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return etcdstore.Open(ctx, etcdstore.Config{
				Endpoints: c.Endpoints(), Prefix: prefix, Feed: feed,
				MaxTxnOps: c.MaxTxnOps(), MaxRequestBytes: c.MaxRequestBytes(),
			})
		}})
	}
}
