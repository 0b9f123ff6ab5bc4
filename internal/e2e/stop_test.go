package e2e

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
)

// TestBuiltDaemonStopsWithinItsBudgetWhileEtcdHangs: a daemon on a
// one-member etcd, writers with calls under way; the member hangs
// (SIGSTOP) and the daemon is sent SIGTERM. The stop must end within the
// daemon's stop budget and a margin, with status 0: what is written is
// durable, and what the daemon would have told etcd on its way out (its
// API-server record removed, its leaderships resigned, its lease revoked)
// goes when the lease expires instead, which the log says.
func TestBuiltDaemonStopsWithinItsBudgetWhileEtcdHangs(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.NewProcesses(t, bin(t, "etcdcluster"), 1)
	eps := cluster.Endpoints()
	// etcd's request timeout as serve's default (5 s): three requests of
	// it one after the other are more than the budget.
	d := startDaemon(t, "a", eps, "/stop/", "--etcd-request-timeout", "5s", "--shutdown-timeout", "4s")
	creds := d.credentials(t)
	admin := mustDial(t, creds, d.addr, false, "")
	machines := addMachines(t, admin, 8)

	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	var wg sync.WaitGroup
	var ws []*writer
	for i := range 4 {
		c := mustDial(t, creds, d.addr, true, creds.DefaultModelUUID)
		w := statusWriter("w"+strconv.Itoa(i), machines[2*i:2*i+2])
		ws = append(ws, w)
		wg.Go(func() { _ = w.run(ctx, c) })
	}
	waitFor(t, "writes acknowledged", func() bool {
		for _, w := range ws {
			if w.acked.Load() == 0 {
				return false
			}
		}
		return true
	})

	if err := cluster.Pause(0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cluster.Resume(0) }()
	t0 := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-d.exit:
		d.exit <- err
	case <-time.After(stopTimeout):
		t.Fatalf("no exit within %s of SIGTERM\n%s", stopTimeout, d.logTail())
	}
	took := time.Since(t0)
	cancel()
	wg.Wait()
	t.Logf("stopped in %s: %v\n%s", took.Round(time.Millisecond), err, d.logTail())
	if bound := 4*time.Second + 2*time.Second; took > bound {
		t.Errorf("stop took %s with etcd hung; want at most %s (budget and a margin)", took.Round(time.Millisecond), bound)
	}
	if err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if !strings.Contains(d.logTail(), "lease") {
		t.Errorf("the log does not say the lease is left to expire:\n%s", d.logTail())
	}
}
