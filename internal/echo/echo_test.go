package echo_test

import (
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/echo"
	"github.com/provisiond/provisiond/rpc/client"
)

// goroutinesIn counts the goroutines whose stack has a frame of fn.
func goroutinesIn(t *testing.T, fn string) int {
	t.Helper()
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// TestEchoServesLikeTheRPCServer: the echo server answers our real client
// over its TLS websocket with the params as the response, lets go of
// net/http's goroutine of each connection once upgraded (an idle
// connection holds only its read loop, as the rpc server's does), and
// Close ends every connection and waits for their goroutines.
func TestEchoServesLikeTheRPCServer(t *testing.T) {
	srv, err := echo.Serve(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = srv.Close()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 3
	conns := make([]*client.Conn, n)
	for i := range conns {
		c, err := client.Dial(ctx, client.Config{Addr: srv.Addr, CACert: srv.CACert, NoSessionCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
		var got map[string]int
		if err := c.Call(ctx, "Echo", 1, "", "Echo", map[string]int{"n": i}, &got); err != nil {
			t.Fatal(err)
		}
		if got["n"] != i {
			t.Fatalf("echo of n=%d answered %v", i, got)
		}
	}
	if got := srv.Conns(); got != n {
		t.Fatalf("Conns = %d, want %d", got, n)
	}
	// Each upgraded connection's net/http goroutine returns (bounded
	// wait: it returns right after starting the read loop).
	deadline := time.Now().Add(10 * time.Second)
	for goroutinesIn(t, "net/http.(*conn).serve") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("net/http's connection goroutines still running: %d", goroutinesIn(t, "net/http.(*conn).serve"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := goroutinesIn(t, "internal/echo.serve"); got != n {
		t.Fatalf("%d echo read loops, want %d", got, n)
	}

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if got := goroutinesIn(t, "internal/echo.serve"); got != 0 {
		t.Fatalf("%d echo read loops after Close", got)
	}
	for i, c := range conns {
		select {
		case <-c.Done():
		case <-ctx.Done():
			t.Fatalf("client %d not disconnected by Close", i)
		}
	}
	if c, err := client.Dial(ctx, client.Config{Addr: srv.Addr, CACert: srv.CACert, NoSessionCache: true, DialTimeout: 5 * time.Second}); err == nil {
		c.Close()
		t.Fatal("dial after Close succeeded")
	}
}
