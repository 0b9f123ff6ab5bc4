package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
)

// TestEtcdMembersKilledDuringWrites: two daemons on a three-member etcd;
// agents and the admin write through both while an etcd follower, and
// then the leader, is stopped as a crash would stop it. Nothing
// acknowledged is lost (read through both daemons), writes resume on the
// same connections (once a new leader is elected), the watchers keep
// working, and the members come back. Measured (logged): each stop to
// each writer's first acknowledged write after it and its longest pause;
// the error answers meanwhile.
func TestEtcdMembersKilledDuringWrites(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.NewCluster(t, 3)
	eps := cluster.Endpoints()
	a := startDaemon(t, "a", eps, "/members/")
	b := startDaemon(t, "b", eps, "/members/")
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

	// An agent on a watching the machines, all along.
	w, err := client.NewProvisioner(mustDial(t, creds, a.addr, true, model)).WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	watched := &seen{}
	go watched.follow(w)

	// A follower, then the leader; each started again once the writes
	// resumed and were checked.
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
			member = (member + 1) % len(cluster.Members())
		}
		stopping := time.Now()
		cluster.Stop(member)
		stopped := time.Since(stopping)
		waitFor(t, "every writer to have 10 writes acknowledged after the "+role+" stopped", func() bool {
			return !slices.ContainsFunc(all, func(w *writer) bool { return len(w.acksSince(stopping)) < 10 })
		})
		var resumed, gaps []time.Duration
		for _, w := range all {
			resumed = append(resumed, w.acksSince(stopping)[0].Sub(stopping))
			gaps = append(gaps, w.longestGap(stopping, 10))
		}
		ids := addMachines(t, mustDial(t, creds, b.addr, false, ""), 2)
		waitFor(t, "the watcher on a to see the machines added through b", func() bool { return len(watched.missing(ids)) == 0 })
		stop()
		wg.Wait()
		for i, err := range ends {
			if err != nil {
				t.Fatalf("writer %s: %v (a daemon must not drop its clients when an etcd member goes)", all[i].name, err)
			}
		}
		t.Logf("etcd %s m%d stopped (Stop took %s): first write acknowledged after %s (median over %d writers; longest %s); "+
			"longest pause between two acknowledged writes of a writer %s (median; longest %s)",
			role, member, stopped.Round(time.Millisecond), median(resumed).Round(time.Millisecond), len(resumed),
			slices.Max(resumed).Round(time.Millisecond), median(gaps).Round(time.Millisecond), slices.Max(gaps).Round(time.Millisecond))
		for _, w := range all {
			t.Logf("writer %s: error answers %s", w.name, w.errorCodes())
		}

		// Nothing acknowledged is lost, as both daemons see it, before
		// and after the member is back.
		for _, d := range []*daemonProc{a, b} {
			checkStatuses(t, creds, d, all[:4]...)
			checkConfig(t, creds, d, config)
		}
		if err := cluster.Restart(member); err != nil {
			t.Fatal(err)
		}
		ids = addMachines(t, mustDial(t, creds, a.addr, false, ""), 1)
		waitFor(t, "the watcher on a to see the machine added through a", func() bool { return len(watched.missing(ids)) == 0 })
		checkStatuses(t, creds, b, all[:4]...)
	}
}
