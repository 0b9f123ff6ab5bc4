package rpc_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

// The connection's writer (conn.go): what one commit gives a connection
// leaves in one write, a client that stops reading is dropped at the
// write deadline, and no goroutine of a connection outlives it. Writes are
// counted at the server's TCP connection (tapConn), under its TLS.

// commit stands for the watcher hub's publish of one commit: Settle,
// the server's Config.Settle, waits while it is giving replies.
type commit struct {
	settling  chan struct{} // Settle was called during the commit
	published chan struct{} // closed when the commit has given every reply
}

func (c *commit) Settle() {
	select {
	case c.settling <- struct{}{}:
	default:
	}
	<-c.published
}

// A commit gives ten waiting calls their replies one after another; the
// writer, woken by the first, waits in Settle until the commit is done,
// and all ten leave in one write of the socket, one TLS record, in the
// order given. Without Settle the first reply would have been written
// alone: the writer was already writing it when the others came.
func TestOneCommitsRepliesLeaveInOneWrite(t *testing.T) {
	const n = 10
	root := &commit{settling: make(chan struct{}, 1), published: make(chan struct{})}
	ws, sc, reps, _ := startLaterCalls(t, func(c *rpc.Config) { c.Settle = root.Settle }, n)
	before, recBefore := sc.counts()

	reps[0](params.StringResult{Result: smallResult(1)}, nil)
	select {
	case <-root.settling: // the writer has encoded the first reply and waits
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not settle after 10s")
	}
	if now, _ := sc.counts(); len(now) != len(before) {
		t.Fatalf("the writer wrote %v before the commit ended", now[len(before):])
	}
	for i := 2; i <= n; i++ {
		reps[i-1](params.StringResult{Result: smallResult(i)}, nil)
	}
	close(root.published)
	readReplies(t, ws, 1, n, smallResult)

	after, recAfter := sc.counts()
	if writes, records := len(after)-len(before), recAfter-recBefore; writes != 1 || records != 1 {
		t.Fatalf("one commit's %d replies went out in %d socket writes (%v) and %d TLS records; want 1 and 1",
			n, writes, after[len(before):], records)
	}
}

// smallBuffers makes the server's sockets' send buffers small, so that a
// client that stops reading stalls the server's writes after little data
// whatever the kernel's autotuning would allow.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return nc, err
}

// A client that stops reading is dropped once a write has waited for the
// write deadline: the socket buffers fill, the writer's write times out,
// the connection ends with every call answered (the handlers waiting for
// room in the queue get it back as the writer drops the replies), and
// neither the reader nor the writer nor a handler of it is left.
func TestStuckClientEndsAtTheWriteDeadline(t *testing.T) {
	const n = 40
	large := strings.Repeat("z", 64<<10)
	ts := startServerOn(t, func(c *rpc.Config) {
		c.WriteTimeout = 300 * time.Millisecond
		c.MaxUnsent = 128 << 10
	}, func(ln net.Listener) net.Listener { return smallBuffers{ln} })
	ws := ts.dialRaw(t)
	defer ws.Close()
	if tc, ok := ws.NetConn().(*tls.Conn); ok {
		if tcp, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = tcp.SetReadBuffer(16 << 10)
		}
	}
	for i := 1; i <= n; i++ {
		send(t, ws, `{"request-id":`+strconv.Itoa(i)+`,"type":"T","version":1,"request":"Later"}`)
	}
	reps := ts.root.later.takeAll(t, n)
	start := time.Now()
	for _, r := range reps {
		r(params.StringResult{Result: large}, nil)
	}
	// Encoded replies too, from handlers that wait for room.
	for i := n + 1; i <= n+20; i++ {
		send(t, ws, `{"request-id":`+strconv.Itoa(i)+`,"type":"T","version":1,"request":"Echo","params":{"entities":[{"tag":"`+large[:8<<10]+`"}]}}`)
	}
	waitConns(t, ts, 0) // bounded: 10s, where the default write timeout is 30s
	t.Logf("dropped %v after the replies (write timeout 300ms)", time.Since(start))
	leaktest.WaitAtMost(t, 0, "provisiond/rpc.(*Conn).")
}

// A stop that runs out of time cuts the connections still open, one
// whose writer is blocked on a client that stopped reading too, long
// before that writer's write deadline (a minute here): crypto/tls closes
// the socket without its close_notify alert while a write is under way.
func TestShutdownCutsAStuckClientAtItsDeadline(t *testing.T) {
	// Each reply alone more than the socket holds: the one being written
	// when the stop begins blocks the writer (the stop drops the replies
	// of Later calls not yet encoded).
	const n = 4
	large := strings.Repeat("z", 4<<20)
	ts := startServerOn(t, func(c *rpc.Config) {
		c.WriteTimeout = time.Minute
		c.MaxUnsent = 128 << 10
	}, func(ln net.Listener) net.Listener { return smallBuffers{ln} })
	ws := ts.dialRaw(t)
	if tc, ok := ws.NetConn().(*tls.Conn); ok {
		if tcp, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = tcp.SetReadBuffer(16 << 10)
		}
	}
	for i := 1; i <= n; i++ {
		send(t, ws, `{"request-id":`+strconv.Itoa(i)+`,"type":"T","version":1,"request":"Later"}`)
	}
	for _, r := range ts.root.later.takeAll(t, n) {
		r(params.StringResult{Result: large}, nil)
	}
	// Wait (bounded) for the writer to be blocked on the full socket.
	for deadline := time.Now().Add(10 * time.Second); len(leaktest.Stacks("rpc.(*wireConn)", "runtime_pollWait")) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the writer never blocked on the socket")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the deadline's error", err)
	}
	waitConns(t, ts, 0) // bounded: 10s, where the write deadline is a minute
	t.Logf("cut %v after the stop began (budget 300ms)", time.Since(start))
	leaktest.WaitAtMost(t, 0, "provisiond/rpc.(*Conn).")
}

// Every goroutine of a connection ends with it, whichever side ends it:
// the client's close, the server's Close and Shutdown, with calls waiting
// and replies in flight.
func TestNoGoroutineOutlivesItsConnection(t *testing.T) {
	ws, _, reps, ts := startLaterCalls(t, nil, 5)
	for i := range reps[:3] {
		reps[i](params.StringResult{Result: smallResult(i + 1)}, nil)
	}
	readReplies(t, ws, 1, 3, smallResult)
	_ = ws.Close() // two calls still wait: teardown waits for their replies
	for _, r := range reps[3:] {
		r(nil, &params.Error{Message: "watcher has been stopped", Code: params.CodeStopped})
	}
	waitConns(t, ts, 0)
	leaktest.WaitAtMost(t, 0, "provisiond/rpc.(*Conn).")

	c := ts.dial(t)
	if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitConns(t, ts, 0)
	leaktest.WaitAtMost(t, 0, "provisiond/rpc.(*Conn).")
}

// The writer runs only while there is something to write: on an idle
// connection it stops, and the next ping or reply starts it again. Each
// step waits (bounded) for the writer to have stopped, so the ping and
// the reply that follow are written by a writer started for them.
func TestIdleWritersStopAndStartAgain(t *testing.T) {
	ts := startServer(t, func(c *rpc.Config) { c.PingPeriod = 20 * time.Millisecond; c.PongWait = time.Minute })
	ws := ts.dialRaw(t)
	pings := make(chan struct{}, 1000)
	ws.SetPingHandler(func(data string) error {
		pings <- struct{}{}
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	replies := make(chan []byte, 10)
	go func() { // the client's reader: it answers the pings
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				close(replies)
				return
			}
			replies <- data
		}
	}()
	const writer = "provisiond/rpc.(*Conn).write"
	timeout := time.After(10 * time.Second)
	for id := 1; id <= 3; id++ {
		leaktest.WaitAtMost(t, 0, writer)
		drain(pings)
		for range 2 { // pings, the second at least from a writer the ping timer started
			select {
			case <-pings:
			case <-timeout:
				t.Fatal("no ping after the writer stopped")
			}
		}
		leaktest.WaitAtMost(t, 0, writer)
		send(t, ws, `{"request-id":`+strconv.Itoa(id)+`,"type":"T","version":1,"request":"Nothing"}`)
		select { // the reply, from a writer the reply started
		case data, ok := <-replies:
			if !ok || !strings.Contains(string(data), `"request-id":`+strconv.Itoa(id)) {
				t.Fatalf("reply %q %v, want one to request %d", data, ok, id)
			}
		case <-timeout:
			t.Fatalf("no reply to request %d after the writer stopped", id)
		}
	}
}

// drain empties ch without waiting.
func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
