package etcdtest_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/etcdtest"
)

func client(t *testing.T, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestOneMember(t *testing.T) {
	c := etcdtest.New(t)
	cli := client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("got %v", resp.Kvs)
	}
	// The generous limits are in force: a transaction of 200 puts (a
	// default etcd refuses more than 128).
	ops := make([]clientv3.Op, 200)
	for i := range ops {
		ops[i] = clientv3.OpPut("k"+string(rune('a'+i%26))+string(rune('a'+i/26)), "v")
	}
	if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatalf("200-op txn: %v", err)
	}
	c.Close()
	c.Close() // idempotent
}

// TestKillLeader kills the leader of three members: the other two elect a
// new one and go on committing; the killed member comes back and catches up.
func TestKillLeader(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	cli := client(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "before", "1"); err != nil {
		t.Fatal(err)
	}
	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Stop(lead)
	if c.Members()[lead].Running() {
		t.Fatal("stopped member still running")
	}
	next, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == lead {
		t.Fatalf("leader %d still leads after being stopped", lead)
	}
	// The client fails over to the members left (a put may meet the
	// election: retry within the test's bound).
	for {
		_, err := cli.Put(ctx, "after", "1")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no put after the leader's death: %v", err)
		}
	}
	if err := c.Restart(lead); err != nil {
		t.Fatal(err)
	}
	// The restarted member serves the write made while it was down.
	one, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members()[lead].ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	resp, err := one.Get(ctx, "after")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("restarted member lacks the write: %v", resp.Kvs)
	}
}
