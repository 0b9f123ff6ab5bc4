package rpc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/rpc"
)

// Why connections end, and how long a client has to answer a ping.

// endObserver is an rpc.Observer that hands on the reasons connections
// end with.
type endObserver struct{ ended chan string }

func newEndObserver() *endObserver { return &endObserver{ended: make(chan string, 16)} }

func (o *endObserver) ConnOpened()                                            {}
func (o *endObserver) ConnClosed(reason string)                               { o.ended <- reason }
func (o *endObserver) RequestDone(string, int, string, string, time.Duration) {}

// want waits (bounded) for the next connection to end and checks why.
func (o *endObserver) want(t *testing.T, reason string) {
	t.Helper()
	select {
	case got := <-o.ended:
		if got != reason {
			t.Fatalf("connection ended for %q, want %q", got, reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no connection ended in 10s, want one ending for %q", reason)
	}
}

// Each way a connection ends is told to the Observer, through a real TLS
// websocket.
func TestConnEndReasons(t *testing.T) {
	for _, tc := range []struct {
		reason string
		mod    func(*rpc.Config)
		end    func(t *testing.T, ts *testServer, ws *websocket.Conn)
	}{
		{rpc.EndClientClosed, nil, func(t *testing.T, _ *testServer, ws *websocket.Conn) {
			err := ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
				time.Now().Add(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
		}},
		{rpc.EndClientGone, nil, func(t *testing.T, _ *testServer, ws *websocket.Conn) {
			ws.NetConn().Close() // no close frame
		}},
		// No pongs: the pong wait ends the connection.
		{rpc.EndReadDeadline, func(c *rpc.Config) { c.PingPeriod, c.PongWait = 20*time.Millisecond, 300*time.Millisecond },
			func(*testing.T, *testServer, *websocket.Conn) {}},
		{rpc.EndMalformed, nil, func(t *testing.T, _ *testServer, ws *websocket.Conn) {
			send(t, ws, `not a request`)
		}},
		{rpc.EndOverReadLimit, func(c *rpc.Config) { c.ReadLimit = 1 << 10 }, func(t *testing.T, _ *testServer, ws *websocket.Conn) {
			send(t, ws, `{"request-id":2,"type":"T","version":1,"request":"Nothing","params":"`+strings.Repeat("x", 2<<10)+`"}`)
		}},
		{rpc.EndShutdown, nil, func(t *testing.T, ts *testServer, _ *websocket.Conn) {
			if err := ts.srv.Shutdown(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			obs := newEndObserver()
			ts := startServer(t, func(c *rpc.Config) {
				c.Observer = obs
				if tc.mod != nil {
					tc.mod(c)
				}
			})
			ws := ts.dialRaw(t)
			ws.SetPingHandler(func(string) error { return nil }) // no pongs
			send(t, ws, `{"request-id":1,"type":"T","version":1,"request":"Nothing"}`)
			readRaw(t, ws)
			go func() { // the client's reader, so that close frames are read
				for {
					if _, _, err := ws.NextReader(); err != nil {
						return
					}
				}
			}()
			tc.end(t, ts, ws)
			obs.want(t, tc.reason)
		})
	}
}

// A client has the whole pong wait to answer each ping, counted from the
// ping: a pong late by more than PongWait - PingPeriod after the previous
// one keeps the connection. (The read deadline used to be counted from the
// previous pong alone, which left a pong PongWait - PingPeriod, 6 s of the
// 60 s then, and a busy load generator's pong came later than that.)
func TestPongWaitCountsFromThePing(t *testing.T) {
	const (
		period = 1800 * time.Millisecond
		wait   = 2 * time.Second
		late   = time.Second // over wait - period, under wait
	)
	obs := newEndObserver()
	ts := startServer(t, func(c *rpc.Config) { c.PingPeriod, c.PongWait, c.Observer = period, wait, obs })
	ws := ts.dialRaw(t)
	pings := 0
	answered := make(chan struct{}, 16)
	ws.SetPingHandler(func(data string) error {
		pong := func() {
			_ = ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
			answered <- struct{}{}
		}
		if pings++; pings == 2 {
			time.AfterFunc(late, pong) // the busy client's late pong
			return nil
		}
		pong()
		return nil
	})
	read := make(chan string, 4)
	go func() { // the client's reader: runs the ping handler
		defer close(read)
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			read <- string(data)
		}
	}()
	send(t, ws, `{"request-id":1,"type":"T","version":1,"request":"Nothing"}`)
	timeout := time.After(30 * time.Second)
	for n := 0; n < 2; { // the first pong, then the late one
		select {
		case <-answered:
			n++
		case _, ok := <-read:
			if !ok {
				t.Fatalf("the connection ended (%s) before the late pong", <-obs.ended)
			}
		case <-timeout:
			t.Fatal("no pings")
		}
	}
	// The late pong is out, after the deadline the previous pong set.
	send(t, ws, `{"request-id":2,"type":"T","version":1,"request":"Nothing"}`)
	for {
		select {
		case m, ok := <-read:
			if !ok {
				t.Fatalf("the connection ended (%s) although each pong came within the pong wait of its ping", <-obs.ended)
			}
			if strings.Contains(m, `"request-id":2`) {
				return
			}
		case <-timeout:
			t.Fatal("no reply after the late pong")
		}
	}
}
