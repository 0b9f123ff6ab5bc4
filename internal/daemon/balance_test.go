package daemon_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
)

// TestRebalanceHandsAgentsToADaemonWithRoom: 200 connections on one
// daemon, then a second daemon joins with none. The first, over its share
// (100) by more than the margin (32), closes some with 1001 and refuses
// new ones with 503 while the second has room; each client closed
// reconnects as a Juju agent does (the addresses it knows in turn, the
// first that admits it), so it lands on the second; it stops within the
// margin.
func TestRebalanceHandsAgentsToADaemonWithRoom(t *testing.T) {
	const n, share, margin = 200, 100, 32
	a := startEtcd(t)
	type agent struct {
		c  *client.Conn
		on string // the daemon's address
	}
	var mu sync.Mutex
	agents := make([]*agent, n)
	for i := range agents {
		agents[i] = &agent{c: a.Admin(t, ""), on: a.Addr()}
	}
	b := provisiondtest.Start(t, provisiondtest.Join(a))
	creds := a.Credentials()
	addrs := []string{a.Addr(), b.Addr()} // the busy one first: every move is refused there once
	refused, moved, closeCodes := 0, 0, map[int]int{}
	redial := func(ag *agent) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, addr := range addrs {
			c, err := client.Dial(ctx, client.Config{Addr: addr, CACert: []byte(creds.CACert)})
			if err != nil {
				if se := (*client.DialStatusError)(nil); errors.As(err, &se) && se.StatusCode == http.StatusServiceUnavailable {
					mu.Lock()
					refused++
					mu.Unlock()
					continue
				}
				t.Errorf("dial %s: %v", addr, err)
				return
			}
			if _, err := c.LoginAdmin(ctx, creds); err != nil {
				c.Close()
				t.Errorf("login at %s: %v", addr, err)
				return
			}
			t.Cleanup(func() { c.Close() })
			mu.Lock()
			ag.c, ag.on = c, addr
			moved++
			mu.Unlock()
			return
		}
		t.Errorf("no daemon admitted a reconnecting client")
	}
	count := func() (onA, onB int) {
		mu.Lock()
		defer mu.Unlock()
		for _, ag := range agents {
			select {
			case <-ag.c.Done():
				closeCodes[ag.c.CloseCode()]++
				mu.Unlock()
				redial(ag)
				mu.Lock()
			default:
			}
			if ag.on == a.Addr() {
				onA++
			} else {
				onB++
			}
		}
		return onA, onB
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		onA, onB := count()
		if onA <= share+margin && onA+onB == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: %d connections on the first daemon, %d on the second; want at most %d on the first", onA, onB, share+margin)
		}
		time.Sleep(20 * time.Millisecond) // polling a bounded condition
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d clients moved to the second daemon, %d dials refused by the first", moved, refused)
	if moved == 0 || refused == 0 {
		t.Errorf("%d clients moved, %d dials refused: want some of each", moved, refused)
	}
	for code, k := range closeCodes {
		if code != websocket.CloseGoingAway {
			t.Errorf("%d connections closed with %d, want %d (going away)", k, code, websocket.CloseGoingAway)
		}
	}
	if onA := n - moved; onA < share-margin {
		t.Errorf("%d left on the first daemon: it shed past its share (%d) and margin", onA, share)
	}
}
