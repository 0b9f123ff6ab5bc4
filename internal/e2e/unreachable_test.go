package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestEtcdUnreachable: two daemons on a one-member etcd, which stops.
// Writes fail with code "try again" within --etcd-request-timeout (2s
// here), reads too once the replica is not known to be current, /health
// answers 503; the connections stay open. When etcd is back the daemons
// recover by themselves: writes go through again on the same connections
// and the watchers held through the outage see the changes made after it;
// nothing a writer had acknowledged is lost.
// Measured (logged): how long a write takes to fail, how long until reads
// fail, and etcd's restart to the first write acknowledged.
func TestEtcdUnreachable(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	eps := cluster.Endpoints()
	a := startDaemon(t, "a", eps, "/unreachable/")
	b := startDaemon(t, "b", eps, "/unreachable/")
	creds := a.credentials(t)
	model := creds.DefaultModelUUID
	ctx := ctxT(t)

	agent := mustDial(t, creds, a.addr, true, model)
	w, err := client.NewProvisioner(agent).WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	<-w.Changes()
	watched := &seen{}
	go watched.follow(w)
	// An agent writing through a all along.
	wr := statusWriter("agent", addMachines(t, mustDial(t, creds, a.addr, false, ""), 2))
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var werr error
	var wg sync.WaitGroup
	wg.Go(func() { werr = wr.run(wctx, mustDial(t, creds, a.addr, true, model)) })
	waitFor(t, "the writer to have 10 writes acknowledged", func() bool { return wr.acked.Load() >= 10 })
	admins := map[*daemonProc]*client.ModelAdmin{
		a: client.NewModelAdmin(mustDial(t, creds, a.addr, false, "")),
		b: client.NewModelAdmin(mustDial(t, creds, b.addr, false, "")),
	}

	stopping := time.Now()
	cluster.Stop(0)
	stopped := time.Now()
	t.Logf("etcd stopped in %s", stopped.Sub(stopping).Round(time.Millisecond))
	for _, d := range []*daemonProc{a, b} {
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := admins[d].AddMachines(cctx, params.AddMachinesArgs{Count: 1})
		cancel()
		if !client.IsCode(err, params.CodeTryAgain) {
			t.Fatalf("AddMachines through %s with etcd down: %v; want code %q", d.name, err, params.CodeTryAgain)
		}
		t.Logf("etcd down: a write through %s failed with %q after %s", d.name, params.CodeTryAgain, time.Since(start).Round(time.Millisecond))
	}
	waitFor(t, "reads through a to fail", func() bool {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := admins[a].ListModels(cctx)
		if err != nil && !client.IsCode(err, params.CodeTryAgain) {
			t.Fatalf("ListModels with etcd down: %v; want code %q", err, params.CodeTryAgain)
		}
		return err != nil
	})
	t.Logf("etcd down: reads through a fail with %q %s after etcd stopped", params.CodeTryAgain, time.Since(stopped).Round(time.Millisecond))
	if code, body := health(t, creds, a); code != http.StatusServiceUnavailable || !strings.Contains(body, "store unavailable: ") {
		t.Errorf("/health of a with etcd down: %d %q", code, body)
	}

	if err := cluster.Restart(0); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var added []string
	for _, d := range []*daemonProc{a, b} {
		waitFor(t, "a write through "+d.name+" to be acknowledged", func() bool {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			res, err := admins[d].AddMachines(cctx, params.AddMachinesArgs{Count: 1})
			if err != nil && !client.IsCode(err, params.CodeTryAgain) {
				t.Fatalf("AddMachines through %s after etcd's restart: %v", d.name, err)
			}
			added = append(added, res.Machines...)
			return err == nil
		})
		t.Logf("etcd back: a write through %s acknowledged %s after etcd's restart", d.name, time.Since(restarted).Round(time.Millisecond))
	}
	acked := wr.acked.Load()
	waitFor(t, "the writer to have 10 more writes acknowledged", func() bool { return wr.acked.Load() >= acked+10 })
	stop()
	wg.Wait()
	if werr != nil {
		t.Fatalf("the writer's connection: %v", werr)
	}
	t.Logf("the writer through a: error answers %s; longest pause between two acknowledged writes %s",
		wr.errorCodes(), wr.longestGap(stopping, int(wr.acked.Load())).Round(time.Millisecond))
	checkStatuses(t, creds, b, wr)
	waitFor(t, "the watcher on a to see the machines added after the outage", func() bool { return len(watched.missing(added)) == 0 })
	// /health reuses a probe's result for a second, and a probe started
	// during the outage may end after writes flow again: it turns ok
	// with the next probe.
	waitFor(t, "/health of a to be ok after etcd's restart", func() bool {
		code, _ := health(t, creds, a)
		return code == http.StatusOK
	})
	if agent.Err() != nil {
		t.Errorf("the agent's connection ended: %v", agent.Err())
	}
}

// health returns d's /health answer.
func health(t *testing.T, creds *credentials.Credentials, d *daemonProc) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(creds.CACert))
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: callTimeout}).Get("https://" + d.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
