package etcdtest_test

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/etcdtest"
)

// TestMain runs this test binary as one member of a Processes cluster
// when StartProcesses starts it so (as cmd/etcdcluster does), and the
// tests otherwise.
func TestMain(m *testing.M) {
	if code, ok := etcdtest.MemberMain(os.Args[1:], os.Stderr); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestProcessesPauseLeader: members in processes of their own; the
// leader paused with SIGSTOP stops answering while the other two elect a
// new leader and commit; resumed, it catches up. Killed and restarted, a
// member comes back on its data dir.
func TestProcessesPauseLeader(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.NewProcesses(t, self, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(lead); err != nil {
		t.Fatal(err)
	}
	paused, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Endpoints()[lead]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer paused.Close()
	gctx, gcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if _, err := paused.Get(gctx, "k"); err == nil {
		t.Fatal("the paused member answered")
	}
	gcancel()
	next, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == lead {
		t.Fatalf("the paused member %d leads", lead)
	}
	var others []string
	for i, ep := range c.Endpoints() {
		if i != lead {
			others = append(others, ep)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: others, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "while paused"); err != nil {
		t.Fatal(err)
	}
	if err := c.Resume(lead); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := paused.Get(ctx, "k")
		if err != nil {
			t.Fatalf("the resumed member: %v", err)
		}
		if len(resp.Kvs) == 1 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	c.Stop(lead)
	if c.Running(lead) {
		t.Fatal("a stopped member runs")
	}
	if _, err := cli.Put(ctx, "k", "while stopped"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(lead); err != nil {
		t.Fatal(err)
	}
	resp, err := paused.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "while stopped" {
		t.Fatalf("the restarted member: %v %v", resp, err)
	}
}
