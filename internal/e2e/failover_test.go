package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
)

// failoverAgents is the number of controller agent connections writing
// through the daemon the test kills; each owns two machines.
const failoverAgents = 4

// TestDaemonKilledAgentsFailOver: three daemons on one etcd; agents and
// the admin write through daemon a, which is killed with SIGKILL in the
// middle of it. Every acknowledged write is there, read through b and c;
// each agent logs in again at the next address its login at a listed,
// and its new watcher, on b or c, sees every machine added afterwards;
// writes go on; a's lease expires and it leaves the API server list.
// Measured (logged): kill to every agent logged in again with its
// watcher; kill to a gone from APIHostPorts.
func TestDaemonKilledAgentsFailOver(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	eps := cluster.Endpoints()
	a := startDaemon(t, "a", eps, "/failover/")
	b := startDaemon(t, "b", eps, "/failover/")
	c := startDaemon(t, "c", eps, "/failover/")
	creds := a.credentials(t)
	model := creds.DefaultModelUUID
	ctx := ctxT(t)

	machines := addMachines(t, mustDial(t, creds, a.addr, false, ""), 2*failoverAgents)
	type agent struct {
		w       *writer
		conn    *client.Conn
		servers []string // as its login at a listed them
		seen    *seen
		watch   *client.StringsWatch
	}
	agents := make([]*agent, failoverAgents)
	for i := range agents {
		ag := &agent{w: statusWriter(fmt.Sprintf("agent%d", i), machines[2*i:2*i+2]), conn: mustDial(t, creds, a.addr, true, model)}
		ag.servers = hostPorts(ag.conn.LoginResult().Servers)
		if !slices.Equal(sorted(ag.servers), addrsOf(a, b, c)) || ag.servers[0] != a.addr {
			t.Fatalf("login at a lists %v; want a, then b and c", ag.servers)
		}
		agents[i] = ag
	}
	// The watch on b that sees a go when its lease expires.
	hostPortsWatch, err := client.NewProvisioner(mustDial(t, creds, b.addr, true, model)).WatchAPIHostPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hostPortsWatch.Stop()
	<-hostPortsWatch.Changes()

	config := configWriter("admin", 4)
	adminConn := mustDial(t, creds, a.addr, false, "")
	all := []*writer{config}
	for _, ag := range agents {
		all = append(all, ag.w)
	}
	var wg sync.WaitGroup
	ends := make([]error, len(all))
	for i, w := range all {
		conn := adminConn
		if i > 0 {
			conn = agents[i-1].conn
		}
		wg.Go(func() { ends[i] = w.run(ctx, conn) })
	}
	waitFor(t, "every writer to have 10 writes acknowledged", func() bool {
		return !slices.ContainsFunc(all, func(w *writer) bool { return w.acked.Load() < 10 })
	})
	a.kill(t)
	killed := time.Now()
	wg.Wait()
	for i, err := range ends {
		if !errors.Is(err, client.ErrConnClosed) {
			t.Fatalf("writer %s ended with %v; want the connection closed by the kill", all[i].name, err)
		}
	}

	// Every agent logs in again, trying the addresses its login at a
	// listed, from its own place in the list (Juju's agents shuffle
	// theirs), and watches again.
	var failover []time.Duration
	for i, ag := range agents {
		var conn *client.Conn
		var tried []string
		for k := range ag.servers {
			addr := ag.servers[(i+k)%len(ag.servers)]
			tried = append(tried, addr)
			if conn, err = dial(ctx, creds, addr, true, model); err == nil {
				break
			}
		}
		if conn == nil {
			t.Fatalf("agent %d: no daemon of %v took its login: %v", i, tried, err)
		}
		t.Cleanup(func() { conn.Close() })
		ag.conn = conn
		if ag.watch, err = client.NewProvisioner(conn).WatchModelMachines(ctx); err != nil {
			t.Fatal(err)
		}
		defer ag.watch.Stop()
		initial := <-ag.watch.Changes()
		if missing := missingFrom(initial, machines); len(missing) > 0 {
			t.Fatalf("agent %d: the new watcher's initial machines %v lack %v", i, initial, missing)
		}
		ag.seen = &seen{}
		go ag.seen.follow(ag.watch)
		failover = append(failover, time.Since(killed))
	}
	t.Logf("%d agents logged in again with their watchers %s (median %s) after the kill",
		len(agents), slices.Max(failover).Round(time.Millisecond), median(failover).Round(time.Millisecond))

	// The admin finds another daemon through a's credentials.yaml.
	adminConn, err = client.DialCredentialsFile(ctx, filepath.Join(a.dataDir, credentials.File),
		client.Config{ModelUUID: model, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer adminConn.Close()
	if _, err := adminConn.LoginAdmin(ctx, creds); err != nil {
		t.Fatal(err)
	}

	// Nothing acknowledged is lost, as either daemon left sees it.
	for _, d := range []*daemonProc{b, c} {
		checkStatuses(t, creds, d, all[1:]...)
		checkConfig(t, creds, d, config)
	}

	// Writes go on through b and c, and the new watchers see every
	// machine added from now on, through either.
	wctx, stop := context.WithCancel(ctx)
	for i, w := range all {
		conn := adminConn
		if i > 0 {
			conn = agents[i-1].conn
		}
		wg.Go(func() { ends[i] = w.run(wctx, conn) })
	}
	later := append(addMachines(t, mustDial(t, creds, b.addr, false, ""), 2), addMachines(t, mustDial(t, creds, c.addr, false, ""), 2)...)
	for i, ag := range agents {
		waitFor(t, fmt.Sprintf("agent %d's watcher to see %v", i, later), func() bool { return len(ag.seen.missing(later)) == 0 })
	}
	resumed := map[*writer]int64{}
	for _, w := range all {
		resumed[w] = w.acked.Load()
	}
	waitFor(t, "every writer to have 5 more writes acknowledged", func() bool {
		return !slices.ContainsFunc(all, func(w *writer) bool { return w.acked.Load() < resumed[w]+5 })
	})
	stop()
	wg.Wait()
	for i, err := range ends {
		if err != nil {
			t.Fatalf("writer %s: %v", all[i].name, err)
		}
	}
	for _, w := range all {
		if codes := w.errorCodes(); codes != "none" {
			t.Errorf("writer %s got error answers: %s", w.name, codes)
		}
	}
	checkStatuses(t, creds, c, all[1:]...)

	// a's lease expires: the API servers list b and c, and the watch on b
	// fired.
	p := client.NewProvisioner(mustDial(t, creds, b.addr, true, model))
	waitFor(t, "APIHostPorts without a", func() bool {
		hp, err := p.APIHostPorts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Equal(sorted(hostPorts(hp.Servers)), addrsOf(b, c))
	})
	gone := time.Since(killed)
	select {
	case <-hostPortsWatch.Changes():
	case <-time.After(waitTimeout):
		t.Fatal("WatchAPIHostPorts on b did not fire when a went")
	}
	t.Logf("a left the API server list %s after the kill (lease TTL %s)", gone.Round(time.Millisecond), leaseTTL)
	waitFor(t, "b's credentials.yaml without a", func() bool {
		cr, err := credentials.Read(filepath.Join(b.dataDir, credentials.File))
		return err == nil && slices.Equal(sorted(cr.APIAddresses), addrsOf(b, c))
	})
}

// missingFrom returns the ids of want not in got.
func missingFrom(got, want []string) []string {
	var out []string
	for _, id := range want {
		if !slices.Contains(got, id) {
			out = append(out, id)
		}
	}
	return out
}
