package rawetcd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store/etcdstore/rawetcd"
)

// The baselines run on a real etcd, count what they did, and leave
// nothing behind under the prefix. No timing is asserted.
func TestBaselines(t *testing.T) {
	c := etcdtest.New(t)
	ctx := context.Background()
	const prefix = "/bench/"
	// Only commits that end inside the measuring window count: on a
	// loaded box a short window may see none, so it grows until one does.
	var r rawetcd.TxnResult
	for d := 200 * time.Millisecond; d <= 10*time.Second && r.Commits == 0; d *= 5 {
		var err error
		if r, err = rawetcd.TxnBench(ctx, rawetcd.Conn{Endpoints: c.Endpoints()}, prefix, 4, 2, 100, 50*time.Millisecond, d, nil); err != nil {
			t.Fatal(err)
		}
	}
	if r.Commits == 0 || len(r.Latencies) != r.Commits || r.PerSecond() <= 0 {
		t.Errorf("TxnBench: %d commits, %d latencies", r.Commits, len(r.Latencies))
	}
	w, err := rawetcd.WatchBench(ctx, rawetcd.Conn{Endpoints: c.Endpoints()}, prefix, 3, 2, 2, 50, 300*time.Millisecond, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if w.Puts == 0 || w.Lost != 0 || w.Deliveries != 2*w.Puts || len(w.Latencies) != w.Deliveries {
		t.Errorf("WatchBench: %d puts, %d deliveries, %d lost, %d latencies", w.Puts, w.Deliveries, w.Lost, len(w.Latencies))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	count := func() int64 {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if n := count(); n != 0 {
		t.Errorf("the benchmarks left %d keys under %s", n, prefix)
	}
	if _, err := cli.Put(ctx, prefix+"x", "y"); err != nil {
		t.Fatal(err)
	}
	if err := rawetcd.DeletePrefix(ctx, rawetcd.Conn{Endpoints: c.Endpoints()}, prefix); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Errorf("DeletePrefix left %d keys under %s", n, prefix)
	}
}

// WatchBench at a wider shape, its watches spread over several streams
// of etcd's gRPC watch API: every put reaches every watcher of its key,
// once, and the run leaves nothing behind.
func TestWatchBenchFanOut(t *testing.T) {
	c := etcdtest.New(t)
	ctx := context.Background()
	const (
		prefix        = "/bench/"
		keys, perKey  = 200, 10
		clients, rate = 4, 200
	)
	w, err := rawetcd.WatchBench(ctx, rawetcd.Conn{Endpoints: c.Endpoints()}, prefix, keys, perKey, clients, rate, time.Second, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if w.Puts == 0 || w.Deliveries != w.Puts*perKey || w.Lost != 0 || len(w.Latencies) != w.Deliveries {
		t.Errorf("WatchBench: %d puts, %d deliveries (want %d), %d lost, %d latencies", w.Puts, w.Deliveries, w.Puts*perKey, w.Lost, len(w.Latencies))
	}
	for _, l := range w.Latencies {
		if l <= 0 {
			t.Fatalf("a latency of %v", l)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("WatchBench left %d keys under %s", resp.Count, prefix)
	}
}

// A watch etcd refuses to create fails the run, with etcd's reason: here
// a user allowed only another prefix.
func TestWatchBenchRefused(t *testing.T) {
	c := etcdtest.New(t)
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "other"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "other", "/other/", clientv3.GetPrefixRangeEnd("/other/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "limited", "limited-pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "limited", "other"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	conn := rawetcd.Conn{Endpoints: c.Endpoints(), Username: "limited", Password: "limited-pw"}
	_, err = rawetcd.WatchBench(ctx, conn, "/bench/", 3, 2, 2, 50, 300*time.Millisecond, time.Second)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("WatchBench as a user who may not watch its prefix: %v, want etcd's refusal", err)
	}
}
