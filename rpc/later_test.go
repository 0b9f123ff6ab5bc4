package rpc_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// laterCalls holds the reply functions of the "Later" calls waiting in a
// testRoot, as a watcher holds its waiting Next calls.
type laterCalls struct {
	mu      sync.Mutex
	replies []func(any, error)
	stopped bool
	added   chan struct{} // signalled on each add
}

func (l *laterCalls) add(reply func(any, error)) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		reply(nil, &params.Error{Message: "watcher has been stopped", Code: params.CodeStopped})
		return
	}
	l.replies = append(l.replies, reply)
	l.mu.Unlock()
	select {
	case l.added <- struct{}{}:
	default:
	}
}

// take removes and returns the oldest waiting reply, waiting a bounded
// time for one.
func (l *laterCalls) take(t testing.TB) func(any, error) {
	t.Helper()
	l.waitFor(t, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.replies[0]
	l.replies = l.replies[1:]
	return r
}

// waitFor waits (bounded) until n calls are waiting.
func (l *laterCalls) waitFor(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		have := len(l.replies)
		l.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-l.added:
		case <-deadline.C:
			t.Fatalf("%d Later calls waiting after 10s; want %d", have, n)
		}
	}
}

// stopAll replies "stopped" to every waiting call, as stopping a
// connection's watchers does.
func (l *laterCalls) stopAll() {
	l.mu.Lock()
	rs := l.replies
	l.replies = nil
	l.stopped = true
	l.mu.Unlock()
	for _, r := range rs {
		r(nil, &params.Error{Message: "watcher has been stopped", Code: params.CodeStopped})
	}
}

// connGoroutines counts the goroutines whose stack is inside a method of
// rpc.Conn: each connection's reader, its writer while it runs, and
// handlers.
func connGoroutines() int {
	return len(leaktest.Stacks("github.com/provisiond/provisiond/rpc.(*Conn)."))
}

// waitConnGoroutines waits (bounded) until at most want goroutines are in
// rpc.Conn: handlers end once they have queued their replies.
func waitConnGoroutines(t testing.TB, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := connGoroutines()
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in rpc.Conn; want at most %d", n, want)
		}
		time.Sleep(10 * time.Millisecond) // polling a bounded condition
	}
}

func TestLaterRepliesFromAnotherGoroutine(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	res := make(chan error, 1)
	var r params.StringResult
	go func() { res <- c.Call(ctxT(t), "T", 1, "", "Later", nil, &r) }()
	reply := ts.root.later.take(t)
	go reply(params.StringResult{Result: "later"}, nil)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if r.Result != "later" {
		t.Fatalf("result %q, want later", r.Result)
	}
}

func TestLaterReplyDuringStart(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	var r params.StringResult
	if err := c.Call(ctxT(t), "T", 1, "", "LaterNow", nil, &r); err != nil {
		t.Fatal(err)
	}
	if r.Result != "now" {
		t.Fatalf("result %q, want now", r.Result)
	}
}

func TestLaterSecondReplyDropped(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	var r params.StringResult
	if err := c.Call(ctxT(t), "T", 1, "", "LaterTwice", nil, &r); err != nil {
		t.Fatal(err)
	}
	if r.Result != "first" {
		t.Fatalf("result %q, want first", r.Result)
	}
	// The connection goes on serving, with no stray reply.
	if err := c.Call(ctxT(t), "T", 1, "", "LaterNow", nil, &r); err != nil || r.Result != "now" {
		t.Fatalf("after a double reply: %v %q", err, r.Result)
	}
}

func TestLaterPanicIsAnErrorReply(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	err := c.Call(ctxT(t), "T", 1, "", "LaterPanic", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "boom later") {
		t.Fatalf("err %v, want the panic", err)
	}
	if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
		t.Fatalf("after a panic: %v", err)
	}
}

// Waiting Later calls hold their request slots, but no goroutine: with
// 200 of them waiting, only the connection's reader is in rpc.Conn.
func TestLaterCallsHoldNoGoroutine(t *testing.T) {
	ts := startServer(t, func(c *rpc.Config) { c.MaxRequests = 201 })
	ws := ts.dialRaw(t)
	const n = 200
	for i := 1; i <= n; i++ {
		send(t, ws, `{"request-id":`+strconv.Itoa(i)+`,"type":"T","version":1,"request":"Later"}`)
	}
	ts.root.later.waitFor(t, n)
	waitConnGoroutines(t, 1)

	// One slot is left: the next call is served, the one after is refused.
	send(t, ws, `{"request-id":1001,"type":"T","version":1,"request":"Later"}`)
	ts.root.later.waitFor(t, n+1)
	send(t, ws, `{"request-id":1002,"type":"T","version":1,"request":"Nothing"}`)
	m := readRaw(t, ws)
	if m["request-id"] != float64(1002) || m["error-code"] != params.CodeTryAgain {
		t.Fatalf("over the request limit: %v", m)
	}

	// Replies to all of them arrive, each once.
	for i := 0; i < n+1; i++ {
		reply := ts.root.later.take(t)
		go reply(params.StringResult{Result: "ok"}, nil)
	}
	seen := make(map[float64]bool)
	for i := 0; i < n+1; i++ {
		m := readRaw(t, ws)
		id, _ := m["request-id"].(float64)
		if seen[id] || m["error"] != nil {
			t.Fatalf("reply %v (seen before: %v)", m, seen[id])
		}
		seen[id] = true
	}
	waitConnGoroutines(t, 1)
}

// Closing the connection kills the root, which replies to waiting Later
// calls before the close frame.
func TestShutdownEndsLaterCalls(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	errc := make(chan error, 1)
	go func() { errc <- c.Call(ctxT(t), "T", 1, "", "Later", nil, nil) }()
	ts.root.later.waitFor(t, 1)
	if err := ts.srv.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !client.IsCode(err, params.CodeStopped) && err == nil {
		t.Fatalf("err %v, want stopped or the connection's end", err)
	}
	if ts.srv.Conns() != 0 {
		t.Fatalf("%d connections left", ts.srv.Conns())
	}
}

// In a stop, the replies of waiting Later calls are dropped: the client
// gets the going-away close frame with nothing before it, and every call
// still ends (Shutdown returns with no connection left).
func TestShutdownDropsLaterReplies(t *testing.T) {
	ts := startServer(t, nil)
	ws := ts.dialRaw(t)
	const n = 10 // an agent's watchers, each with a Next waiting
	for i := 1; i <= n; i++ {
		send(t, ws, `{"request-id":`+strconv.Itoa(i)+`,"type":"T","version":1,"request":"Later"}`)
	}
	ts.root.later.waitFor(t, n)
	if err := ts.srv.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := ws.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("read %q, %v: want the going-away close frame and no reply before it", data, err)
	}
	if ts.srv.Conns() != 0 {
		t.Fatalf("%d connections left", ts.srv.Conns())
	}
}

// An idle connection is served by its reader alone: its writer stops once
// nothing is left to write, the pings need no goroutine of their own, and
// no handler stays.
func TestIdleConnectionHasOneGoroutine(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	for i := 0; i < 10; i++ {
		if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitConnGoroutines(t, 1)
	if n := connGoroutines(); n != 1 {
		t.Fatalf("%d goroutines in rpc.Conn, want 1 (the reader)", n)
	}
}
