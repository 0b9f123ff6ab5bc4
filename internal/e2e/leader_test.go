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
	writeThroughFaults(t, cluster.Endpoints(), "/members/", memberFault{
		what:   "stopped",
		leader: cluster.Leader,
		strike: func(i int) error {
			start := time.Now()
			cluster.Stop(i)
			t.Logf("stopping m%d took %s", i, time.Since(start).Round(time.Millisecond))
			return nil
		},
		heal: cluster.Restart,
	})
}

// memberFault is what befalls one etcd member, and its end: a crash and
// a restart, or SIGSTOP and SIGCONT.
type memberFault struct {
	what   string // for the log: "stopped", "hung (SIGSTOP)"
	leader func(ctx context.Context) (int, error)
	strike func(i int) error
	heal   func(i int) error
}

// writeThroughFaults runs two daemons (startDaemon's flags and extra) on
// eps under prefix; four agents and the admin write through both, and an
// agent on the first watches the machines, while f strikes a follower and
// then the leader, each healed once the writes resumed and were checked.
// Nothing acknowledged may be lost (read through both daemons, before and
// after the healing), no client connection may drop, and the watcher must
// see the machines added after. Measured (logged): each strike to each
// writer's first acknowledged write after it and its longest pause; the
// error answers meanwhile. It returns each role's longest pause.
func writeThroughFaults(t *testing.T, eps []string, prefix string, f memberFault, extra ...string) map[string]time.Duration {
	t.Helper()
	a := startDaemon(t, "a", eps, prefix, extra...)
	b := startDaemon(t, "b", eps, prefix, extra...)
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

	pauses := map[string]time.Duration{}
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
		member, err := f.leader(lctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if role == "follower" {
			member = (member + 1) % len(eps)
		}
		struck := time.Now()
		if err := f.strike(member); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every writer to have 10 writes acknowledged after the "+role+" was "+f.what, func() bool {
			return !slices.ContainsFunc(all, func(w *writer) bool { return len(w.acksSince(struck)) < 10 })
		})
		var resumed, gaps []time.Duration
		for _, w := range all {
			resumed = append(resumed, w.acksSince(struck)[0].Sub(struck))
			gaps = append(gaps, w.longestGap(struck, 10))
		}
		ids := addMachines(t, mustDial(t, creds, b.addr, false, ""), 2)
		waitFor(t, "the watcher on a to see the machines added through b", func() bool { return len(watched.missing(ids)) == 0 })
		stop()
		wg.Wait()
		for i, err := range ends {
			if err != nil {
				t.Fatalf("writer %s: %v (a daemon must not drop its clients when an etcd member is %s)", all[i].name, err, f.what)
			}
		}
		t.Logf("etcd %s m%d %s: first write acknowledged after %s (median over %d writers; longest %s); "+
			"longest pause between two acknowledged writes of a writer %s (median; longest %s)",
			role, member, f.what, median(resumed).Round(time.Millisecond), len(resumed),
			slices.Max(resumed).Round(time.Millisecond), median(gaps).Round(time.Millisecond), slices.Max(gaps).Round(time.Millisecond))
		for _, w := range all {
			t.Logf("writer %s: error answers %s", w.name, w.errorCodes())
		}
		pauses[role] = slices.Max(gaps)

		// Nothing acknowledged is lost, as both daemons see it, before
		// and after the member is back.
		for _, d := range []*daemonProc{a, b} {
			checkStatuses(t, creds, d, all[:4]...)
			checkConfig(t, creds, d, config)
		}
		if err := f.heal(member); err != nil {
			t.Fatal(err)
		}
		ids = addMachines(t, mustDial(t, creds, a.addr, false, ""), 1)
		waitFor(t, "the watcher on a to see the machine added through a", func() bool { return len(watched.missing(ids)) == 0 })
		checkStatuses(t, creds, b, all[:4]...)
	}
	return pauses
}
