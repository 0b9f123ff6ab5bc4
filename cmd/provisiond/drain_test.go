package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
)

// A stop with a drain, set by a reload just before it as an operator
// rolling a controller's daemons would: the daemon stops accepting and
// closes its agents' connections a share at a time over the drain, each
// with the going-away close frame, then stops as usual and exits 0. The
// same reload turns --rebalance off: it changes without a restart.
func TestDrainOnStop(t *testing.T) {
	const n, drain = 8, 2 * time.Second
	dir := t.TempDir()
	cfg := filepath.Join(dir, "provisiond.yaml")
	if err := os.WriteFile(cfg, []byte("log-level: info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	p := startService(t, nil, "--config", cfg, "--data-dir", data)
	p.waitLog(t, "serving", msgIs("serving"))
	if err := os.WriteFile(cfg, []byte("log-level: info\ndrain: "+drain.String()+"\nrebalance: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.signal(t, syscall.SIGHUP)
	if l := p.waitLog(t, "reloaded", msgIs("reloaded")); !strings.Contains(l["changed"].(string), "drain 0s -> 2s") ||
		!strings.Contains(l["changed"].(string), "rebalance true -> false") {
		t.Fatalf("reloaded: %v", l)
	}

	creds, err := daemon.ReadCredentials(filepath.Join(data, daemon.CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), serviceWait)
	defer cancel()
	ccfg := client.Config{Addr: creds.APIAddresses[0], ModelUUID: creds.ControllerModelUUID, CACert: []byte(creds.CACert)}
	var mu sync.Mutex
	var ends []time.Time
	conns := make([]*client.Conn, n)
	for i := range conns {
		c, err := client.Dial(ctx, ccfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		a := creds.ControllerAgent
		if _, err := c.LoginAgent(ctx, a.Tag, a.Password, a.Nonce); err != nil {
			t.Fatal(err)
		}
		c.OnEnd(func() {
			mu.Lock()
			ends = append(ends, time.Now())
			mu.Unlock()
		})
		conns[i] = c
	}

	p.signal(t, syscall.SIGTERM)
	l := p.waitLog(t, "draining", msgIs("draining: closing the API connections a share at a time"))
	if l["connections"].(float64) < n || l["over"].(float64) != float64(drain) {
		t.Errorf("draining: %v", l)
	}
	if c, err := client.Dial(ctx, ccfg); err == nil { // the listener is closed
		c.Close()
		t.Error("a connection was admitted while draining")
	}
	if l := p.waitLog(t, "drained", msgIs("drained")); l["err"] != nil {
		t.Errorf("drained: %v", l)
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	for i, c := range conns {
		<-c.Done()
		if c.CloseCode() != websocket.CloseGoingAway {
			t.Errorf("connection %d: close code %d, want 1001", i, c.CloseCode())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if spread := ends[len(ends)-1].Sub(ends[0]); spread < drain/2 {
		t.Errorf("the connections ended within %v of each other, want them spread over about %v", spread, drain)
	}
}
