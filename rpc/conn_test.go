package rpc_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// testRoot serves a tiny facade "T" v1 straight from rpc.Root, so the
// transport is tested without the facade layer.
type testRoot struct {
	release chan struct{} // Block waits on it
	killed  chan struct{}
	once    sync.Once
	later   laterCalls
}

func (r *testRoot) FindMethod(req rpc.Request) (rpc.Caller, error) {
	call, err := r.find(req.Facade, req.Version, req.Method)
	if err != nil {
		return nil, err
	}
	return rpc.CallerFunc(call), nil
}

func (r *testRoot) find(facade string, version int, method string) (rpc.CallerFunc, error) {
	if facade != "T" || version != 1 {
		return nil, rpc.UnknownFacadeError(facade, version)
	}
	switch method {
	case "Echo":
		return func(_ context.Context, raw json.RawMessage) (any, error) {
			var a struct {
				Entities []params.Entity `json:"entities"`
			}
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &a); err != nil {
					return nil, err
				}
			}
			return a, nil
		}, nil
	case "Nothing":
		return func(context.Context, json.RawMessage) (any, error) { return nil, nil }, nil
	case "Revisions":
		// Sets each revision of its params in turn, as a bulk Watch
		// call's watchers each tell theirs.
		return func(ctx context.Context, raw json.RawMessage) (any, error) {
			var revs []uint64
			if err := json.Unmarshal(raw, &revs); err != nil {
				return nil, err
			}
			for _, r := range revs {
				rpc.SetRevision(ctx, r)
			}
			return nil, nil
		}, nil
	case "Fail":
		return func(context.Context, json.RawMessage) (any, error) {
			return nil, &params.Error{Message: "nope", Code: params.CodeNotFound}
		}, nil
	case "Panic":
		return func(context.Context, json.RawMessage) (any, error) { panic("boom") }, nil
	case "Later":
		return func(context.Context, json.RawMessage) (any, error) {
			return rpc.LaterFunc(func(_ context.Context, reply func(any, error)) { r.later.add(reply) }), nil
		}, nil
	case "LaterNow":
		return func(context.Context, json.RawMessage) (any, error) {
			return rpc.LaterFunc(func(_ context.Context, reply func(any, error)) {
				reply(params.StringResult{Result: "now"}, nil)
			}), nil
		}, nil
	case "LaterTwice":
		return func(context.Context, json.RawMessage) (any, error) {
			return rpc.LaterFunc(func(_ context.Context, reply func(any, error)) {
				reply(params.StringResult{Result: "first"}, nil)
				reply(params.StringResult{Result: "second"}, nil)
			}), nil
		}, nil
	case "LaterPanic":
		return func(context.Context, json.RawMessage) (any, error) {
			return rpc.LaterFunc(func(context.Context, func(any, error)) { panic("boom later") }), nil
		}, nil
	case "Block":
		return func(ctx context.Context, _ json.RawMessage) (any, error) {
			select {
			case <-r.release:
				return params.StringResult{Result: "released"}, nil
			case <-r.killed:
				return nil, &params.Error{Message: "watcher has been stopped", Code: params.CodeStopped}
			}
		}, nil
	}
	return nil, rpc.UnknownMethodError(facade, version, method)
}

func (r *testRoot) Kill() {
	r.once.Do(func() { close(r.killed) })
	r.later.stopAll()
}

type testServer struct {
	addr string
	ca   []byte
	srv  *rpc.Server
	root *testRoot
}

func startServer(t testing.TB, mod func(*rpc.Config)) *testServer {
	t.Helper()
	return startServerOn(t, mod, nil)
}

// startServerOn is startServer with the server's TCP listener wrapped by
// wrap (nil: as it is), under TLS.
func startServerOn(t testing.TB, mod func(*rpc.Config), wrap func(net.Listener) net.Listener) *testServer {
	t.Helper()
	mat, err := pki.LoadOrCreate(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := mat.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{ca: mat.CACertPEM, root: &testRoot{
		release: make(chan struct{}), killed: make(chan struct{}),
		later: laterCalls{added: make(chan struct{}, 1)},
	}}
	cfg := rpc.Config{NewRoot: func(rpc.ConnInfo, *rpc.Conn) rpc.Root { return ts.root }}
	if mod != nil {
		mod(&cfg)
	}
	ts.srv, err = rpc.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	hs := &http.Server{Handler: ts.srv}
	done := make(chan struct{})
	go func() { defer close(done); _ = hs.Serve(tls.NewListener(ln, tlsCfg)) }()
	ts.addr = ln.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		if err := ts.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return ts
}

func (ts *testServer) dial(t testing.TB) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addr: ts.addr, CACert: ts.ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (ts *testServer) dialRaw(t testing.TB) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, err := client.DialRaw(ctx, client.Config{Addr: ts.addr, CACert: ts.ca})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// readRaw reads one message with a deadline.
func readRaw(t testing.TB, ws *websocket.Conn) map[string]any {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := ws.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("reply %q is not JSON: %v", data, err)
	}
	return m
}

func send(t testing.TB, ws *websocket.Conn, msg string) {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

func TestCallShapes(t *testing.T) {
	ts := startServer(t, nil)
	ws := ts.dialRaw(t)

	send(t, ws, `{"request-id":1,"type":"T","version":1,"request":"Echo","params":{"Entities":[{"Tag":"machine-0"}]}}`)
	got := readRaw(t, ws)
	if _, has := got["error"]; has || got["request-id"] != 1.0 {
		t.Fatalf("success reply = %v", got)
	}
	if b, _ := json.Marshal(got["response"]); string(b) != `{"entities":[{"tag":"machine-0"}]}` {
		t.Errorf("response = %s", b)
	}

	send(t, ws, `{"request-id":2,"type":"T","version":1,"request":"Nothing","params":null}`)
	got = readRaw(t, ws)
	if b, _ := json.Marshal(got); string(b) != `{"request-id":2,"response":{}}` {
		t.Errorf("empty reply = %s", b)
	}

	send(t, ws, `{"request-id":3,"type":"T","version":1,"request":"Fail"}`)
	got = readRaw(t, ws)
	if b, _ := json.Marshal(got); string(b) != `{"error":"nope","error-code":"not found","request-id":3,"response":{}}` {
		t.Errorf("error reply = %s", b)
	}

	// Legacy V0 framing is answered in kind.
	send(t, ws, `{"RequestId":4,"Type":"T","Version":1,"Request":"Fail"}`)
	got = readRaw(t, ws)
	if b, _ := json.Marshal(got); string(b) != `{"Error":"nope","ErrorCode":"not found","RequestId":4,"Response":{}}` {
		t.Errorf("v0 error reply = %s", b)
	}
}

// Every row of the failure table of specs/rpc.md §1.6 that rpc owns.
func TestFailureRows(t *testing.T) {
	ts := startServer(t, nil)
	tests := []struct {
		name string
		msg  string
		want string // exact reply JSON
	}{
		{"unknown facade", `{"request-id":1,"type":"Nope","version":0,"request":"X"}`,
			`{"error":"unknown facade type \"Nope\"","error-code":"not implemented","request-id":1,"response":{}}`},
		{"unknown facade with version", `{"request-id":1,"type":"Nope","version":2,"request":"X"}`,
			`{"error":"unknown version 2 for facade type \"Nope\"","error-code":"not implemented","request-id":1,"response":{}}`},
		{"unknown version", `{"request-id":1,"type":"T","version":9,"request":"Echo"}`,
			`{"error":"unknown version 9 for facade type \"T\"","error-code":"not implemented","request-id":1,"response":{}}`},
		{"unknown method", `{"request-id":1,"type":"T","version":1,"request":"Zap"}`,
			`{"error":"unknown method \"Zap\" at version 1 for facade type \"T\"","error-code":"not implemented","request-id":1,"response":{}}`},
		{"params that do not decode", `{"request-id":1,"type":"T","version":1,"request":"Echo","params":{"entities":"x"}}`,
			`{"error":"json: cannot unmarshal string into Go struct field .entities of type []params.Entity","request-id":1,"response":{}}`},
		{"panic in a handler", `{"request-id":1,"type":"T","version":1,"request":"Panic"}`,
			`{"error":"boom","request-id":1,"response":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := ts.dialRaw(t)
			send(t, ws, tt.msg)
			b, _ := json.Marshal(readRaw(t, ws))
			if string(b) != tt.want {
				t.Errorf("reply\n got %s\nwant %s", b, tt.want)
			}
			// The connection stays: a later call is answered.
			send(t, ws, `{"request-id":2,"type":"T","version":1,"request":"Nothing"}`)
			if got := readRaw(t, ws); got["request-id"] != 2.0 {
				t.Errorf("connection did not stay usable: %v", got)
			}
		})
	}
}

func TestMalformedMessageClosesWithoutReply(t *testing.T) {
	ts := startServer(t, nil)
	for _, msg := range []string{`{"request-id":`, `[1]`, `null`, ``, `{"request-id":1,"version":"3","type":"T"}`, `{"request-id":-5,"type":"T"}`} {
		t.Run(msg, func(t *testing.T) {
			ws := ts.dialRaw(t)
			send(t, ws, msg)
			_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, data, err := ws.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
				t.Fatalf("got message %q, err %v; want close 1000 and no reply", data, err)
			}
		})
	}
}

func TestNonRequestMessageIsIgnored(t *testing.T) {
	ts := startServer(t, nil)
	ws := ts.dialRaw(t)
	send(t, ws, `{"request-id":7,"response":{}}`)
	send(t, ws, `{"request-id":8,"type":"T","version":1,"request":"Nothing"}`)
	if got := readRaw(t, ws); got["request-id"] != 8.0 {
		t.Fatalf("first reply = %v; want the one for request 8", got)
	}
}

func TestReadLimitClosesWith1009(t *testing.T) {
	ts := startServer(t, func(c *rpc.Config) { c.ReadLimit = 1024 })
	c := ts.dial(t)
	big := params.Entities{Entities: []params.Entity{{Tag: strings.Repeat("x", 2048)}}}
	err := c.Call(ctxT(t), "T", 1, "", "Echo", big, nil)
	if err == nil {
		t.Fatal("oversized message was answered")
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection not closed")
	}
	if code := c.CloseCode(); code != websocket.CloseMessageTooBig {
		t.Fatalf("close code = %d; want 1009 (err %v)", code, c.Err())
	}
}

// A blocked call does not hold up others, and replies go out as they finish.
func TestConcurrentCallsOutOfOrder(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	blocked := make(chan error, 1)
	go func() {
		var r params.StringResult
		err := c.Call(ctxT(t), "T", 1, "", "Block", nil, &r)
		if err == nil && r.Result != "released" {
			err = errors.New("wrong result " + r.Result)
		}
		blocked <- err
	}()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-blocked:
		t.Fatalf("blocked call returned early: %v", err)
	default:
	}
	close(ts.root.release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
}

// A burst of requests sent without reading the replies: each gets exactly
// one reply, whether its handler wrote it or the writer did, and the
// errors the reader answers itself (unknown methods) keep their read order.
func TestRepliesOfABurst(t *testing.T) {
	ts := startServer(t, nil)
	ws := ts.dialRaw(t)
	const n = 300
	go func() {
		for i := 1; i <= n; i++ {
			req := `{"request-id":` + strconv.Itoa(i) + `,"type":"T","version":1,"request":"Echo","params":{"entities":[{"tag":"x"}]}}`
			if i%3 == 0 {
				req = `{"request-id":` + strconv.Itoa(i) + `,"type":"T","version":1,"request":"Missing"}`
			}
			if err := ws.WriteMessage(websocket.TextMessage, []byte(req)); err != nil {
				return
			}
		}
	}()
	seen := map[int]bool{}
	lastErr := 0
	for len(seen) < n {
		m := readRaw(t, ws)
		id := int(m["request-id"].(float64))
		if seen[id] {
			t.Fatalf("request %d answered twice", id)
		}
		seen[id] = true
		if id%3 == 0 {
			if m["error"] == nil {
				t.Fatalf("request %d: no error: %v", id, m)
			}
			if id < lastErr {
				t.Fatalf("reader's error replies out of order: %d after %d", id, lastErr)
			}
			lastErr = id
		} else if m["error"] != nil {
			t.Fatalf("request %d: %v", id, m)
		}
	}
}

func TestRequestLimit(t *testing.T) {
	ts := startServer(t, func(c *rpc.Config) { c.MaxRequests = 2 })
	c := ts.dial(t)
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			for {
				err := c.Call(ctxT(t), "T", 1, "", "Block", nil, nil)
				if !client.IsCode(err, params.CodeTryAgain) {
					errs <- err
					return
				}
			}
		}()
	}
	// Keep calling until the two blocked calls hold both slots.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil)
		if client.IsCode(err, params.CodeTryAgain) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("request limit never reached")
		}
	}
	close(ts.root.release)
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Closing the connection kills the root, so blocked calls return.
func TestShutdownEndsBlockedCalls(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	errc := make(chan error, 1)
	go func() { errc <- c.Call(ctxT(t), "T", 1, "", "Block", nil, nil) }()
	// Make sure the call is running before shutting down.
	if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked call not ended by shutdown")
	}
	if ts.srv.Conns() != 0 {
		t.Fatalf("%d connections left", ts.srv.Conns())
	}
}

// A stop tells every connection to close, more than one chunk's worth of
// them, and each client gets its going-away close frame: a connection's
// teardown, held until every one was told, still runs to its end.
func TestShutdownClosesEveryConnection(t *testing.T) {
	const n = 300 // more than one of Shutdown's chunks
	ts := startServer(t, nil)
	wss := make([]*websocket.Conn, n)
	for i := range wss {
		wss[i] = ts.dialRaw(t)
	}
	waitConns(t, ts, n)
	if err := ts.srv.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for i, ws := range wss {
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := ws.ReadMessage()
		if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Fatalf("connection %d ended with %v, want the going-away close frame", i, err)
		}
	}
	if c := ts.srv.Conns(); c != 0 {
		t.Fatalf("%d connections left", c)
	}
}

func TestMain(m *testing.M) { leaktest.Main(m) }

// Drain closes the connections a share at a time over its duration, each
// with the going-away close frame, and admits none meanwhile.
func TestDrainClosesAShareAtATime(t *testing.T) {
	const n, over = 20, 2 * time.Second // one connection each of Drain's 20 steps
	const waitLimit = 10 * time.Second
	ts := startServer(t, nil)
	var mu sync.Mutex
	var ends []time.Time
	conns := make([]*client.Conn, n)
	for i := range conns {
		conns[i] = ts.dial(t)
		conns[i].OnEnd(func() {
			mu.Lock()
			ends = append(ends, time.Now())
			mu.Unlock()
		})
	}
	waitConns(t, ts, n)
	drained := make(chan error, 1)
	go func() { drained <- ts.srv.Drain(ctxT(t), over) }()
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(over + waitLimit):
		t.Fatal("Drain did not return")
	}
	for i, c := range conns {
		select {
		case <-c.Done():
		case <-time.After(waitLimit):
			t.Fatalf("connection %d still open after Drain", i)
		}
		if c.CloseCode() != websocket.CloseGoingAway {
			t.Fatalf("connection %d: close code %d, want 1001", i, c.CloseCode())
		}
	}
	mu.Lock()
	spread := ends[len(ends)-1].Sub(ends[0])
	mu.Unlock()
	if spread < over/2 {
		t.Fatalf("the connections ended within %v of each other, want them spread over about %v", spread, over)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if c, err := client.Dial(ctx, client.Config{Addr: ts.addr, CACert: ts.ca}); err == nil {
		c.Close()
		t.Fatal("a connection was admitted after Drain")
	}
}
