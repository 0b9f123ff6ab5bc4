package rpc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
)

// What a client may leave for the reader to find above the socket:
// several requests in one TLS record, several records in one TCP segment,
// pongs among requests; and how pings and pongs keep a connection or drop
// it.

// corkConn is the client's TCP connection: while corked, what is written
// is gathered and written in one go at flush.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

func (c *corkConn) flush(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if _, err := c.Conn.Write(c.buf); err != nil {
		t.Fatal(err)
	}
	c.buf = nil
}

// dialCorked dials ts with gorilla over a TLS connection over a corkConn,
// and returns the three.
func dialCorked(t testing.TB, ts *testServer) (*websocket.Conn, *tls.Conn, *corkConn) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ts.ca) {
		t.Fatal("bad CA")
	}
	var tc *tls.Conn
	var cc *corkConn
	d := websocket.Dialer{
		NetDialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			cc = &corkConn{Conn: nc}
			tc = tls.Client(cc, &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName})
			return tc, tc.HandshakeContext(ctx)
		},
	}
	cfg := client.Config{Addr: ts.addr}
	ws, _, err := d.DialContext(ctxT(t), cfg.URL(), http.Header{"Origin": {"http://localhost/"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, tc, cc
}

// clientFrame is a masked client frame of opcode op (final) carrying payload.
func clientFrame(op byte, payload []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	key := [4]byte{7, 1, 8, 2}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// echoRequest is an Echo request with id whose message is about size bytes.
func echoRequest(id, size int) []byte {
	tag := strings.Repeat("m", max(size-80, 1))
	return []byte(fmt.Sprintf(`{"request-id":%d,"type":"T","version":1,"request":"Echo","params":{"entities":[{"tag":"%s"}]}}`, id, tag))
}

// readReplyIDs reads n replies and fails unless they answer ids from..from+n-1.
func readReplyIDs(t testing.TB, ws *websocket.Conn, from, n int) {
	t.Helper()
	seen := map[int]bool{}
	for range n {
		m := readRaw(t, ws)
		id, _ := m["request-id"].(float64)
		if m["error"] != nil || int(id) < from || int(id) >= from+n || seen[int(id)] {
			t.Fatalf("reply %v; want one to each of %d..%d", m, from, from+n-1)
		}
		seen[int(id)] = true
	}
}

func TestRequestsLeftAboveTheSocketAreServed(t *testing.T) {
	ts := startServer(t, nil)
	ws, tc, cc := dialCorked(t, ts)
	pong := clientFrame(websocket.PongMessage, []byte("p"))
	id := 1
	// A pong split over two TLS records, then a request.
	t.Run("a pong split over records", func(t *testing.T) {
		for _, part := range [][]byte{pong[:1], pong[1:3], pong[3:], clientFrame(websocket.TextMessage, echoRequest(id, 100))} {
			if _, err := tc.Write(part); err != nil {
				t.Fatal(err)
			}
		}
		id++
		readReplyIDs(t, ws, id-1, 1)
	})
	for _, tc2 := range []struct {
		name  string
		sizes []int // of the requests
		pongs bool  // a pong before each request
		split bool  // one TLS record per frame, in one TCP write
	}{
		{name: "small requests in one record", sizes: []int{100, 100, 100}},
		{name: "a request past gorilla's buffer in the record", sizes: []int{200, 900}},
		{name: "large requests in one record", sizes: []int{3000, 5000, 100}},
		{name: "requests past a record's size", sizes: []int{20000, 100}},
		{name: "pongs among requests", sizes: []int{100, 2000, 100}, pongs: true},
		{name: "records in one segment", sizes: []int{100, 100, 3000, 100}, split: true},
		{name: "records with pongs in one segment", sizes: []int{100, 100}, pongs: true, split: true},
	} {
		t.Run(tc2.name, func(t *testing.T) {
			var all []byte
			if tc2.split {
				cc.cork()
			}
			for _, size := range tc2.sizes {
				var b []byte
				if tc2.pongs {
					b = append(b, pong...)
				}
				b = append(b, clientFrame(websocket.TextMessage, echoRequest(id, size))...)
				id++
				if tc2.split {
					if _, err := tc.Write(b); err != nil {
						t.Fatal(err)
					}
					continue
				}
				all = append(all, b...)
			}
			if tc2.split {
				cc.flush(t)
			} else if _, err := tc.Write(all); err != nil {
				t.Fatal(err)
			}
			readReplyIDs(t, ws, id-len(tc2.sizes), len(tc2.sizes))
		})
	}
}

// An idle connection answered by its client's pongs stays up through many
// pong waits and serves the next call.
func TestPongsKeepAnIdleConnection(t *testing.T) {
	ts := startServer(t, func(c *rpc.Config) { c.PingPeriod = 20 * time.Millisecond; c.PongWait = 200 * time.Millisecond })
	ws := ts.dialRaw(t)
	pings := make(chan struct{}, 1000)
	ws.SetPingHandler(func(data string) error {
		pings <- struct{}{}
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	read := make(chan map[string]any, 1)
	go func() {
		// The client's reader: runs the ping handler, and returns the reply.
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				close(read)
				return
			}
			read <- map[string]any{"data": string(data)}
		}
	}()
	send(t, ws, `{"request-id":1,"type":"T","version":1,"request":"Nothing"}`)
	if _, ok := <-read; !ok {
		t.Fatal("no reply")
	}
	// Twenty pings (400ms, two pong waits) answered, still up.
	timeout := time.After(10 * time.Second)
	for range 20 {
		select {
		case <-pings:
		case <-timeout:
			t.Fatal("pings stopped")
		}
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"request-id":2,"type":"T","version":1,"request":"Nothing"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case m, ok := <-read:
		if !ok || !strings.Contains(m["data"].(string), `"request-id":2`) {
			t.Fatalf("reply %v %v after the pongs", m, ok)
		}
	case <-timeout:
		t.Fatal("no reply after the pongs")
	}
	waitConnGoroutines(t, 1) // the reader; the writer has stopped
}

// A client the server hears from (here a request every tenth of the ping
// period, as a Juju agent's Pinger.Ping every minute) is not pinged; once
// it is quiet, it is pinged again and its pongs keep it.
func TestHeardClientIsNotPinged(t *testing.T) {
	const period = 200 * time.Millisecond
	ts := startServer(t, func(c *rpc.Config) { c.PingPeriod = period; c.PongWait = 2 * time.Second })
	ws := ts.dialRaw(t)
	pinged := make(chan time.Time, 1000)
	ws.SetPingHandler(func(data string) error {
		pinged <- time.Now()
		return ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	replies := make(chan struct{}, 1000)
	go func() {
		for { // the client's reader: runs the ping handler, counts replies
			if _, _, err := ws.ReadMessage(); err != nil {
				close(replies)
				return
			}
			replies <- struct{}{}
		}
	}()
	// Two seconds (ten ping periods) of a request every 20 ms.
	busy := time.Now()
	var last time.Time // the last request sent
	for i := 1; time.Since(busy) < 2*time.Second; i++ {
		last = time.Now()
		send(t, ws, fmt.Sprintf(`{"request-id":%d,"type":"T","version":1,"request":"Nothing"}`, i))
		if _, ok := <-replies; !ok {
			t.Fatal("connection ended while busy")
		}
		time.Sleep(period / 10) // the client's own pace
	}
	// A loaded box may hold the client back for more than a ping period
	// once or twice; pinged every period it would have been ten times.
	if n := len(pinged); n > 2 {
		t.Errorf("pinged %d times in 10 ping periods of requests every tenth of one", n)
	}
	for len(pinged) > 0 {
		<-pinged
	}
	// Quiet now: pinged again, and kept by its pongs.
	timeout := time.After(10 * time.Second)
	for range 3 {
		select {
		case at := <-pinged:
			if at.Sub(last) < period {
				t.Errorf("pinged %v after the last request, want at least the ping period %v", at.Sub(last), period)
			}
		case <-timeout:
			t.Fatal("a quiet client was not pinged")
		}
	}
	if ts.srv.Conns() != 1 {
		t.Errorf("connections = %d, want 1", ts.srv.Conns())
	}
}

// A client that stops answering pings is dropped after the pong wait.
func TestSilentClientIsDropped(t *testing.T) {
	ts := startServer(t, func(c *rpc.Config) { c.PingPeriod = 20 * time.Millisecond; c.PongWait = 300 * time.Millisecond })
	ws := ts.dialRaw(t)
	ws.SetPingHandler(func(string) error { return nil }) // no pongs
	send(t, ws, `{"request-id":1,"type":"T","version":1,"request":"Nothing"}`)
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := ws.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	// The server closes the connection: the client's read ends.
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Fatal("read a message, want the connection's end")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a silent client for 10s")
	}
	waitConns(t, ts, 0)
}

// waitConns waits (bounded) until the server has n connections.
func waitConns(t testing.TB, ts *testServer, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ts.srv.Conns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections after 10s, want %d", ts.srv.Conns(), n)
		}
		time.Sleep(5 * time.Millisecond) // polling a bounded condition
	}
}

// Connections end with the client's close and with the server's shutdown,
// and no goroutine of theirs is left.
func TestConnectionsEnd(t *testing.T) {
	ts := startServer(t, nil)
	a, b := ts.dial(t), ts.dial(t)
	for _, c := range []*client.Conn{a, b} {
		if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	waitConns(t, ts, 1)
	if err := ts.srv.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitConns(t, ts, 0)
	leaktest.WaitAtMost(t, 0, "provisiond/rpc.(*Conn).")
}
