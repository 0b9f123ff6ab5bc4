package rpc_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
)

// TestShedAndAdmit: Shed closes as many open connections as asked, each
// with 1001 and counted out with the reason "shed", and leaves the rest
// serving; while Admit returns an error an upgrade is refused with HTTP
// 503 and that text, and admitted again once it returns nil.
func TestShedAndAdmit(t *testing.T) {
	const n, shed = 6, 2
	const waitLimit = 10 * time.Second
	var refuse atomic.Bool
	obs := newEndObserver()
	ts := startServer(t, func(c *rpc.Config) {
		c.Observer = obs
		c.Admit = func() error {
			if refuse.Load() {
				return errors.New("this server holds more than its share: try another")
			}
			return nil
		}
	})
	conns := make([]*client.Conn, n)
	for i := range conns {
		conns[i] = ts.dial(t)
	}
	waitConns(t, ts, n)
	if got := ts.srv.Shed(shed); got != shed {
		t.Fatalf("Shed(%d) = %d", shed, got)
	}
	waitConns(t, ts, n-shed)
	for range shed {
		obs.want(t, rpc.EndShed)
	}
	ended := func() (n int) {
		for _, c := range conns {
			select {
			case <-c.Done():
				n++
			default:
			}
		}
		return n
	}
	deadline := time.Now().Add(waitLimit)
	for ended() != shed {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients saw their connection end, want %d", ended(), shed)
		}
		time.Sleep(5 * time.Millisecond) // polling a bounded condition
	}
	for i, c := range conns {
		select {
		case <-c.Done():
			if c.CloseCode() != websocket.CloseGoingAway {
				t.Errorf("connection %d: close code %d, want 1001", i, c.CloseCode())
			}
		default:
			if err := c.Call(ctxT(t), "T", 1, "", "Echo", nil, nil); err != nil {
				t.Errorf("connection %d, not shed: %v", i, err)
			}
		}
	}
	if got := ts.srv.Shed(0); got != 0 {
		t.Errorf("Shed(0) = %d", got)
	}

	refuse.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addr: ts.addr, CACert: ts.ca})
	if err == nil {
		c.Close()
		t.Fatal("admitted while Admit refuses")
	}
	var se *client.DialStatusError
	if !errors.As(err, &se) || se.StatusCode != 503 {
		t.Errorf("refused dial: %v, want HTTP 503", err)
	}
	refuse.Store(false)
	ts.dial(t)
	waitConns(t, ts, n-shed+1)
}
