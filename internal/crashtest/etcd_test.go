package crashtest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/provisiond/provisiond/internal/crashtest"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
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
			Settle:    settleEtcd(t, cluster),
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
		return statetest.OpenStore(func(feed store.Feed) (store.Store, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return etcdstore.Open(ctx, etcdstore.Config{
				Endpoints: c.Endpoints(), Prefix: prefix, Feed: feed,
				MaxTxnOps: c.MaxTxnOps(), MaxRequestBytes: c.MaxRequestBytes(),
			})
		}, state.Options{})
	}
}

// settleEtcd returns once etcd has decided every request a killed daemon
// sent it (crashtest.Etcd.Settle). Two steps:
//
//  1. No unary call is being handled by the member (it runs in this
//     process: gRPC's counters of calls started and handled, in the
//     default prometheus registry, are equal for every method): each call
//     the dead daemon's connections carried has returned, having proposed
//     its entry to raft or not. A handler does not wait for its entry once
//     the caller is gone, so the entry may still be unapplied.
//  2. A transaction through raft after them: etcd applies entries in log
//     order, so once it is applied (etcd answered) every entry proposed
//     before it is too. Its comparison holds (the key never exists) and
//     its then branch is empty: it writes nothing, and the revision does
//     not move; its else branch's put keeps etcd from serving it as a
//     read without raft.
//
// While the daemon is stopped nothing else calls the member (the
// harness's own state is closed), so step 1 waits for the dead daemon's
// calls only: a poll bounded by ctx. Calls found in flight and writes
// that landed while settling (the dead daemon's, after its death) are
// logged.
func settleEtcd(t *testing.T, c *etcdtest.Cluster) func(context.Context) error {
	const never = "/crashtest-settle-never-written"
	return func(ctx context.Context) error {
		cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		first, err := cli.Get(ctx, never, clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		var busy float64 // the most calls seen in flight
		for {
			n, err := unaryCallsInFlight()
			if err != nil {
				return err
			}
			busy = max(busy, n)
			if n == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%v etcd calls still being handled: %w", n, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(never), "=", 0)).
			Else(clientv3.OpPut(never, "")).Commit()
		if err != nil {
			return fmt.Errorf("the barrier transaction: %w", err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("the barrier transaction found %s written", never)
		}
		if resp.Header.Revision > first.Header.Revision || busy > 0 {
			// The daemon's commits each write the feed key; the lease of
			// a daemon killed earlier expiring only deletes.
			landed, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMinModRev(first.Header.Revision+1))
			if err != nil {
				return err
			}
			if busy > 0 || len(landed.Kvs) > 0 {
				var keys []string
				for _, kv := range landed.Kvs {
					keys = append(keys, string(kv.Key))
				}
				t.Logf("settling after a kill: %v etcd calls still in flight at most; written meanwhile (revisions %d to %d): %q",
					busy, first.Header.Revision+1, resp.Header.Revision, keys)
			}
		}
		return nil
	}
}

// unaryCallsInFlight returns the unary gRPC calls the embedded etcd
// members of this process have started and not finished handling.
func unaryCallsInFlight() (float64, error) {
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return 0, err
	}
	sum := func(name string) (float64, bool) {
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			var n float64
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "grpc_type" && l.GetValue() == "unary" {
						n += m.GetCounter().GetValue()
					}
				}
			}
			return n, true
		}
		return 0, false
	}
	started, ok1 := sum("grpc_server_started_total")
	handled, ok2 := sum("grpc_server_handled_total")
	if !ok1 || !ok2 {
		return 0, errors.New("no gRPC server counters in the default prometheus registry: is etcd embedded in this process?")
	}
	return started - handled, nil
}
