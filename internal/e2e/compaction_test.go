package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestFeedCompactedPastWakesWatchers: daemon a reaches etcd only through
// member m0, daemon b through the two others. m0 is stopped: a is cut off
// (what it applied is at most etcd's revision then, the cut) while b
// writes, and etcd's history is compacted to its revision after those
// writes, two or more past the cut, so the revision a would resume its
// feed from is gone. When m0 is back, a cannot resume: it reloads, counts
// it (provisiond_store_feed_resets_total) and wakes every watcher it
// holds: the agent on a sees its notify watcher fire and its strings
// watcher fail, or its connection closed (a reset ends every login); it
// watches again, and the new initial event holds the machines added while
// a was away; what b acknowledged meanwhile reads back through a, and
// later changes reach the new watcher. Every wait is bounded
// (waitTimeout). Measured (logged): m0's restart to a's watchers woken.
func TestFeedCompactedPastWakesWatchers(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.NewCluster(t, 3)
	m := cluster.Members()
	a := startDaemon(t, "a", []string{m[0].ClientURL}, "/compact/")
	b := startDaemon(t, "b", []string{m[1].ClientURL, m[2].ClientURL}, "/compact/")
	creds := a.credentials(t)
	model := creds.DefaultModelUUID
	ctx := ctxT(t)
	before := addMachines(t, mustDial(t, creds, a.addr, false, ""), 1)

	// The agent on a: a notify watcher and a strings watcher.
	conn := mustDial(t, creds, a.addr, true, model)
	p := client.NewProvisioner(conn)
	notify, err := p.WatchForModelConfigChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Stop()
	recvNotify(t, "the notify watcher's initial event", notify)
	machines, err := p.WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer machines.Stop()
	if initial := recvStrings(t, "the strings watcher's initial event", machines); len(missingFrom(initial, before)) > 0 {
		t.Fatalf("initial machines %v; want %v", initial, before)
	}

	// a cut off; b writes; history compacted past the cut.
	cluster.Stop(0)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m[1].ClientURL, m[2].ClientURL}, DialTimeout: callTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cut := etcdRevision(t, cli)
	config := configWriter("b", 2)
	bAdmin := mustDial(t, creds, b.addr, false, "")
	away := addMachines(t, bAdmin, 2)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { werr = config.run(wctx, bAdmin) })
	waitFor(t, "a write acknowledged through b while a is cut off", func() bool { return config.acked.Load() > 0 })
	stop()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	compacted := etcdRevision(t, cli)
	if compacted < cut+2 { // a resumes from cut+1 at most, which etcd keeps at a compaction to cut+1
		t.Fatalf("etcd's revision moved from %d to only %d while a was cut off", cut, compacted)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	_, err = cli.Compact(cctx, compacted)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a cut off at etcd revision %d; etcd compacted to %d", cut, compacted)

	// m0 back: a's watchers are woken.
	if err := cluster.Restart(0); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	// The notify watcher fires, or ends with the connection: a reset
	// closes every logged-in connection (its credentials may have
	// changed unseen), which may come first.
	select {
	case _, ok := <-notify.Changes():
		if !ok && conn.Err() == nil {
			t.Fatalf("the notify watch on a ended with its connection open: %v", notify.Err())
		}
	case <-time.After(waitTimeout):
		t.Fatal("the notify watcher on a was not woken")
	}
	woken := time.Since(restarted)
	// Ids it delivers are allowed; it must end.
	deadline := time.After(waitTimeout)
	for ended := false; !ended; {
		select {
		case _, ok := <-machines.Changes():
			ended = !ok
		case <-deadline:
			t.Fatalf("the strings watch on a did not end within %v of m0's restart", waitTimeout)
		}
	}
	ended := time.Since(restarted)
	if machines.Err() == nil {
		t.Fatal("the strings watch on a ended without an error")
	}
	t.Logf("m0 restarted: a's notify watcher woken after %s, its strings watcher failed after %s (%v); the agent's connection closed: %v",
		woken.Round(time.Millisecond), ended.Round(time.Millisecond), machines.Err(), conn.Err() != nil)
	if n := metric(t, creds, a, "provisiond_store_feed_resets_total"); n < 1 {
		t.Errorf("a's provisiond_store_feed_resets_total is %v after the reset", n)
	}

	// The agent watches again (logging in again if a closed its
	// connection): the machines added while away are in the initial
	// event, and a later one comes.
	if conn.Err() != nil {
		conn = mustDial(t, creds, a.addr, true, model)
		p = client.NewProvisioner(conn)
	}
	again, err := p.WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	if initial := recvStrings(t, "the new strings watcher's initial event", again); len(missingFrom(initial, append(before, away...))) > 0 {
		t.Fatalf("initial machines after watching again %v; want %v and %v", initial, before, away)
	}
	t.Logf("watching again on a: %s after m0's restart", time.Since(restarted).Round(time.Millisecond))
	s := &seen{}
	go s.follow(again)
	later := addMachines(t, bAdmin, 1)
	waitFor(t, "the new watcher on a to see the machine added through b", func() bool { return len(s.missing(later)) == 0 })
	checkConfig(t, creds, a, config)
}

// etcdRevision returns etcd's current revision (a linearizable read).
func etcdRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, "/e2e-revision-probe", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// recvNotify waits up to waitTimeout for w's next event.
func recvNotify(t *testing.T, what string, w *client.NotifyWatch) {
	t.Helper()
	select {
	case _, ok := <-w.Changes():
		if !ok {
			t.Fatalf("%s: the watch ended: %v", what, w.Err())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// recvStrings waits up to waitTimeout for w's next event.
func recvStrings(t *testing.T, what string, w *client.StringsWatch) []string {
	t.Helper()
	select {
	case ids, ok := <-w.Changes():
		if !ok {
			t.Fatalf("%s: the watch ended: %v", what, w.Err())
		}
		return ids
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
	return nil
}

// metric reads one counter or gauge of d's /metrics (open on loopback).
func metric(t *testing.T, creds *credentials.Credentials, d *daemonProc, name string) float64 {
	t.Helper()
	resp := getMetrics(t, creds, d)
	defer resp.Body.Close()
	return metricIn(t, "/metrics of "+d.name, resp, name)
}

// getMetrics gets d's /metrics (open on loopback); the caller closes the
// body.
func getMetrics(t *testing.T, creds *credentials.Credentials, d *daemonProc) *http.Response {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(creds.CACert))
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: callTimeout}
	resp, err := hc.Get("https://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// metricIn reads one unlabelled counter or gauge from a /metrics
// response (what names it in failures), failing t if it is not there.
func metricIn(t *testing.T, what string, resp *http.Response, name string) float64 {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", what, resp.StatusCode, err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %q", what, line)
			}
			return f
		}
	}
	t.Fatalf("%s has no %s", what, name)
	return 0
}

// TestCompactorCompactsHistory: two daemons on one prefix with
// --etcd-compaction-interval 1s. The one that leads the compactor
// election compacts etcd's history (provisiond_store_compactions_total),
// never past what it has applied: etcd's compact revision (the watch from
// revision 1 is told it) is below that daemon's provisiond_state_revision,
// read after it. Writes and logins go on through both.
func TestCompactorCompactsHistory(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	flags := []string{"--etcd-compaction-interval", "1s"}
	a := startDaemon(t, "a", cluster.Endpoints(), "/compactor/", flags...)
	b := startDaemon(t, "b", cluster.Endpoints(), "/compactor/", flags...)
	creds := a.credentials(t)
	config := configWriter("a", 2)
	ctx := ctxT(t)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var werr error
	aAdmin := mustDial(t, creds, a.addr, false, "")
	wg.Go(func() { werr = config.run(wctx, aAdmin) })
	var leader *daemonProc
	waitFor(t, "a daemon to compact etcd twice", func() bool {
		for _, d := range []*daemonProc{a, b} {
			if metric(t, creds, d, "provisiond_store_compactions_total") >= 2 {
				leader = d
				return true
			}
		}
		return false
	})
	stop()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints(), DialTimeout: callTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	compacted := compactRevision(t, cli)
	applied := metric(t, creds, leader, "provisiond_state_revision")
	t.Logf("%s compacted etcd to revision %d; it had applied %v; %d config writes acknowledged meanwhile",
		leader.name, compacted, applied, config.acked.Load())
	if compacted <= 1 {
		t.Fatalf("etcd's compact revision is %d after %s's compactions", compacted, leader.name)
	}
	if float64(compacted) > applied {
		t.Fatalf("etcd compacted to revision %d, past the %v %s had applied", compacted, applied, leader.name)
	}
	addMachines(t, mustDial(t, creds, b.addr, false, ""), 1)
	checkConfig(t, creds, b, config)
}

// compactRevision returns etcd's compact revision: what a watch from
// revision 1 is told. It fails when etcd says none within callTimeout.
func compactRevision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	for resp := range cli.Watch(ctx, "/e2e-compact-probe", clientv3.WithRev(1)) {
		if resp.CompactRevision != 0 {
			return resp.CompactRevision
		}
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("etcd's compact revision: none within %v (%v)", callTimeout, ctx.Err())
	return 0
}
