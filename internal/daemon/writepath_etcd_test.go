package daemon_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
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
	d := srv.Daemon()
	st := d.State()
	model := d.Credentials().DefaultModelUUID
	agent, tag := loginNewMachine(b, d, model)
	direct, err := st.AddMachine(model, state.MachineParams{})
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
	val := make([]byte, 512)
	var rawRev int64
	var lRaw, lState, lRPC, lEcho []time.Duration
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		info := "bench " + strconv.Itoa(i)

		t0 := time.Now()
		val[0] = byte(i)
		resp, err := raw.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(rawKey), "=", rawRev)).
			Then(clientv3.OpPut(rawKey, string(val))).Commit()
		if err != nil || !resp.Succeeded {
			b.Fatalf("raw txn: %v, %v", err, resp)
		}
		rawRev = resp.Header.Revision
		t1 := time.Now()
		if err := st.SetMachineStatus(model, direct.ID, state.InstanceStatus, state.Status{Status: "running", Message: info}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		var res params.ErrorResults
		args := params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: tag, Status: "running", Info: info}}}
		if err := agent.Call(ctx, "Provisioner", 11, "", "SetInstanceStatus", args, &res); err != nil {
			b.Fatal(err)
		}
		if len(res.Results) != 1 || res.Results[0].Error != nil {
			b.Fatalf("SetInstanceStatus: %+v", res.Results)
		}
		t3 := time.Now()
		if err := echoConn.Call(ctx, "Pinger", 1, "", "Ping", nil, nil); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		lRaw = append(lRaw, t1.Sub(t0))
		lState = append(lState, t2.Sub(t1))
		lRPC = append(lRPC, t3.Sub(t2))
		lEcho = append(lEcho, t4.Sub(t3))
	}
	mRaw, mState, mRPC, mEcho := median(lRaw), median(lState), median(lRPC), median(lEcho)
	b.ReportMetric(mRaw, "µs-raw")
	b.ReportMetric(mState, "µs-state")
	b.ReportMetric(mRPC, "µs-rpc")
	b.ReportMetric(mEcho, "µs-echo")
	b.ReportMetric(mRaw/mRPC, "raw/rpc")
	b.ReportMetric((mRaw+mEcho)/mRPC, "raw+echo/rpc")
}

// BenchmarkSetInstanceStatusEtcd is the rpc part of BenchmarkWritePathEtcd
// alone (for profiles of the daemon's write path in etcd mode).
func BenchmarkSetInstanceStatusEtcd(b *testing.B) {
	srv := provisiondtest.Start(b, provisiondtest.WithStore(provisiondtest.StoreEtcd), provisiondtest.WithLogLevel(slog.LevelWarn))
	d := srv.Daemon()
	agent, tag := loginNewMachine(b, d, d.Credentials().DefaultModelUUID)
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		var res params.ErrorResults
		args := params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: tag, Status: "running", Info: "bench " + strconv.Itoa(i)}}}
		if err := agent.Call(ctx, "Provisioner", 11, "", "SetInstanceStatus", args, &res); err != nil {
			b.Fatal(err)
		}
		if len(res.Results) != 1 || res.Results[0].Error != nil {
			b.Fatalf("SetInstanceStatus: %+v", res.Results)
		}
	}
}
