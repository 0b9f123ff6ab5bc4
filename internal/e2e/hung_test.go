package e2e

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
)

// hungTimeout is the daemons' --etcd-request-timeout in
// TestEtcdMemberHung: the tests' 2s, or serve's default (5s) for the
// figure docs/scale-out.md quotes with it:
//
//	go test -v -run TestEtcdMemberHung ./internal/e2e/ -args -hung-request-timeout 5s
var hungTimeout = flag.Duration("hung-request-timeout", 2*time.Second, "TestEtcdMemberHung's --etcd-request-timeout")

// hungBound is how long writers may pause when an etcd member hangs
// before TestEtcdMemberHung fails: five times the request timeout,
// generous for a loaded box, and short of the 12 s (gRPC's 10 s minimum
// keepalive ping interval and a 2 s timeout) writers paused before the
// daemons watched their members.
func hungBound() time.Duration { return 5 * *hungTimeout }

// TestEtcdMemberHung: two daemons on a three-member etcd whose members
// are processes of their own; agents and the admin write through both
// while a follower, and then the leader, is stopped with SIGSTOP (a hung
// machine: its sockets open, nothing answered). Each daemon moves off the
// hung member (its member watch finds it not answering within half the
// request timeout while another does) and writes resume within hungBound;
// nothing acknowledged is lost; the watchers keep working; resumed with
// SIGCONT, the member is used again. Measured (logged): each pause to
// each writer's first acknowledged write after it and its longest pause.
func TestEtcdMemberHung(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.NewProcesses(t, bin(t, "etcdcluster"), 3)
	eps := cluster.Endpoints()
	a := startDaemon(t, "a", eps, "/hung/", "--etcd-request-timeout", hungTimeout.String())
	b := startDaemon(t, "b", eps, "/hung/", "--etcd-request-timeout", hungTimeout.String())
	creds := a.credentials(t)
	model := creds.DefaultModelUUID
	ctx := ctxT(t)

	machines := addMachines(t, mustDial(t, creds, a.addr, false, ""), 8)
	var all []*writer
	var conns []*client.Conn
	for i, d := range []*daemonProc{a, b, a, b} {
		all = append(all, statusWriter(fmt.Sprintf("agent%d", i), machines[2*i:2*i+2]))
		conns = append(conns, mustDial(t, creds, d.addr, true, model))
	}
	config := configWriter("admin", 4)
	all = append(all, config)
	conns = append(conns, mustDial(t, creds, b.addr, false, ""))

	w, err := client.NewProvisioner(mustDial(t, creds, a.addr, true, model)).WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	watched := &seen{}
	go watched.follow(w)

	for _, role := range []string{"follower", "leader"} {
		wctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		ends := make([]error, len(all))
		for i, wr := range all {
			wg.Go(func() { ends[i] = wr.run(wctx, conns[i]) })
		}
		started := time.Now()
		waitFor(t, "every writer to have 10 writes acknowledged", func() bool {
			return !slices.ContainsFunc(all, func(w *writer) bool { return len(w.acksSince(started)) < 10 })
		})
		lctx, cancel := context.WithTimeout(ctx, waitTimeout)
		member, err := cluster.Leader(lctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if role == "follower" {
			member = (member + 1) % len(eps)
		}
		paused := time.Now()
		if err := cluster.Pause(member); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every writer to have 10 writes acknowledged after the "+role+" hung", func() bool {
			return !slices.ContainsFunc(all, func(w *writer) bool { return len(w.acksSince(paused)) < 10 })
		})
		var resumed, gaps []time.Duration
		for _, w := range all {
			resumed = append(resumed, w.acksSince(paused)[0].Sub(paused))
			gaps = append(gaps, w.longestGap(paused, 10))
		}
		ids := addMachines(t, mustDial(t, creds, b.addr, false, ""), 2)
		waitFor(t, "the watcher on a to see the machines added through b", func() bool { return len(watched.missing(ids)) == 0 })
		stop()
		wg.Wait()
		for i, err := range ends {
			if err != nil {
				t.Fatalf("writer %s: %v (a daemon must not drop its clients when an etcd member hangs)", all[i].name, err)
			}
		}
		t.Logf("request timeout %s: etcd %s m%d hung (SIGSTOP): first write acknowledged after %s (median over %d writers; longest %s); "+
			"longest pause between two acknowledged writes of a writer %s (median; longest %s)",
			*hungTimeout, role, member, median(resumed).Round(time.Millisecond), len(resumed), slices.Max(resumed).Round(time.Millisecond),
			median(gaps).Round(time.Millisecond), slices.Max(gaps).Round(time.Millisecond))
		for _, w := range all {
			t.Logf("writer %s: error answers %s", w.name, w.errorCodes())
		}
		if longest := slices.Max(gaps); longest > hungBound() {
			t.Errorf("a writer paused %s when the %s hung; want at most %s (a daemon must move off a hung member)",
				longest.Round(time.Millisecond), role, hungBound())
		}

		for _, d := range []*daemonProc{a, b} {
			checkStatuses(t, creds, d, all[:4]...)
			checkConfig(t, creds, d, config)
		}
		if err := cluster.Resume(member); err != nil {
			t.Fatal(err)
		}
		ids = addMachines(t, mustDial(t, creds, a.addr, false, ""), 1)
		waitFor(t, "the watcher on a to see the machine added through a", func() bool { return len(watched.missing(ids)) == 0 })
		checkStatuses(t, creds, b, all[:4]...)
	}
}
