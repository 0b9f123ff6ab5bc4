package daemon_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/state"
)

// BenchmarkWritePathEtcd is BenchmarkWritePath in etcd mode: one lone
// writer's durable write at each layer, interleaved in one loop so a noisy
// machine affects them alike, all in this process (etcd, daemon, agent):
//
//	raw    an etcd transaction from etcd's own client (one compare of the
//	       key's mod revision, one 512-byte put), as provisionbench's
//	       baseline makes it
//	state  state.SetMachineStatus on the daemon's State (the store's
//	       commit, the feed's echo, the replica)
//	rpc    Provisioner.SetInstanceStatus from a machine agent over the TLS
//	       websocket: the whole daemon
//	echo   a Ping-shaped call to the echo baseline on the same transport
//
// It reports each layer's median in µs and raw/rpc, (raw+echo)/rpc: the
// ratios provisionbench write -n 1 --store etcd is judged by.
//
// The daemon logs at warn, as provisionbench's does: no audit record per
// write (at info, the default, each SetInstanceStatus is one).
func BenchmarkWritePathEtcd(b *testing.B) {
	srv := provisiondtest.Start(b, provisiondtest.WithStore(provisiondtest.StoreEtcd), provisiondtest.WithLogLevel(slog.LevelWarn))
	d := testkit.Daemon(srv)
	st := d.State()
	model := d.Credentials().DefaultModelUUID
	agent, tag := loginNewMachine(b, d, model)
	direct, err := st.AddMachine(b.Context(), model, state.MachineParams{})
	if err != nil {
		b.Fatal(err)
	}
	endpoints, prefix := srv.Etcd()
	raw, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	rawKey := prefix + "bench/raw"
	addr, ca := startEcho(b)
	echoConn, err := client.Dial(context.Background(), client.Config{Addr: addr, CACert: ca})
	if err != nil {
		b.Fatal(err)
	}
	defer echoConn.Close()

	ctx := context.Background()
	val := string(make([]byte, 512))
	var rawRev int64
	writePath(b, func(int) error {
		resp, err := raw.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(rawKey), "=", rawRev)).
			Then(clientv3.OpPut(rawKey, val)).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return errors.New("raw txn: the compare of a key only this loop writes failed")
		}
		rawRev = resp.Header.Revision
		return nil
	}, st, model, direct.ID, agent, tag, echoConn)
}

// BenchmarkSetInstanceStatusEtcd is the rpc part of BenchmarkWritePathEtcd
// alone (for profiles of the daemon's write path in etcd mode).
func BenchmarkSetInstanceStatusEtcd(b *testing.B) {
	srv := provisiondtest.Start(b, provisiondtest.WithStore(provisiondtest.StoreEtcd), provisiondtest.WithLogLevel(slog.LevelWarn))
	d := testkit.Daemon(srv)
	agent, tag := loginNewMachine(b, d, d.Credentials().DefaultModelUUID)
	setInstanceStatusLoop(b, agent, tag)
}
