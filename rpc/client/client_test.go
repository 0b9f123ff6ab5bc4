package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc/params"
)

const testModelUUID = "6f3c9b2e-1d4a-4c8e-9f00-123456789abc"

// waitLimit bounds every wait on an asynchronous event.
const waitLimit = 10 * time.Second

func dialT(t *testing.T, cfg Config) *Conn {
	t.Helper()
	c, err := Dial(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitDone(t *testing.T, c *Conn) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(waitLimit):
		t.Fatal("connection did not end")
	}
}

func waitHeld(t *testing.T, p *peer, n int) {
	t.Helper()
	for range n {
		select {
		case <-p.held:
		case <-time.After(waitLimit):
			t.Fatal("peer did not receive the blocked request")
		}
	}
}

func TestDialModelLogin(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(testModelUUID))
	if c.LoginResult() != nil {
		t.Fatal("LoginResult before login should be nil")
	}
	res, err := c.LoginUser(t.Context(), "admin", "pw")
	if err != nil {
		t.Fatalf("LoginUser: %v", err)
	}
	if res.ModelTag != "model-"+testModelUUID || res.ControllerTag != testControllerTag || res.ServerVersion != "3.3.0" {
		t.Fatalf("login result = %+v", res)
	}
	if got := c.LoginResult(); got == nil || got.ModelTag != res.ModelTag || len(got.Facades) != 1 {
		t.Fatalf("LoginResult() = %+v", got)
	}
	if path, origin := p.handshake(0); path != "/model/"+testModelUUID+"/api" || origin != "http://localhost/" {
		t.Fatalf("path %q origin %q", path, origin)
	}
	var msg map[string]any
	if err := json.Unmarshal(p.rawRequests()[0], &msg); err != nil {
		t.Fatal(err)
	}
	prm, _ := msg["params"].(map[string]any)
	if msg["request-id"] != 1.0 || msg["type"] != "Admin" || msg["version"] != 3.0 || msg["request"] != "Login" ||
		prm["auth-tag"] != "user-admin" || prm["credentials"] != "pw" || prm["client-version"] != ClientVersion {
		t.Fatalf("login request = %v", msg)
	}
}

func TestDialControllerLoginAgent(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	res, err := c.LoginAgent(t.Context(), "machine-0", "0123456789abcdefghij", "user-admin:bootstrap")
	if err != nil {
		t.Fatalf("LoginAgent: %v", err)
	}
	if res.ModelTag != "" {
		t.Fatalf("model tag %q on controller login", res.ModelTag)
	}
	if path, _ := p.handshake(0); path != "/api" {
		t.Fatalf("path %q", path)
	}
	if r := p.requests()[0]; !bytes.Contains(r.Params, []byte(`"nonce":"user-admin:bootstrap"`)) {
		t.Fatalf("params %s", r.Params)
	}
}

func TestLoginMismatchedModelTag(t *testing.T) {
	p := newPeer(t)
	p.badModelTag.Store(true)
	c := dialT(t, p.config(testModelUUID))
	_, err := c.LoginUser(t.Context(), "admin", "pw")
	if err == nil || !strings.Contains(err.Error(), "mismatched model tag") {
		t.Fatalf("err = %v", err)
	}
	if c.LoginResult() != nil {
		t.Fatal("a rejected login result was recorded")
	}
}

func TestLoginErrorKeepsCode(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(testModelUUID))
	_, err := c.LoginUser(t.Context(), "bad", "pw")
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Code != params.CodeUnauthorized || pe.Message != "invalid entity name or password" {
		t.Fatalf("err = %#v", err)
	}
}

func TestTLSVerification(t *testing.T) {
	p := newPeer(t)
	_, otherCA := genCert(t)
	for name, mod := range map[string]func(*Config){
		"wrong server name": func(c *Config) { c.ServerName = "not-juju" },
		"wrong CA":          func(c *Config) { c.CACert = otherCA },
		"no CA":             func(c *Config) { c.CACert = nil },
	} {
		cfg := p.config("")
		mod(&cfg)
		if c, err := Dial(t.Context(), cfg); err == nil {
			_ = c.Close()
			t.Errorf("%s: Dial succeeded", name)
		}
	}
	// DialRaw uses the same TLS and path handling.
	ws, err := DialRaw(t.Context(), p.config(testModelUUID))
	if err != nil {
		t.Fatalf("DialRaw: %v", err)
	}
	defer ws.Close()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"request-id":7,"type":"Test","version":1,"request":"Echo"}`)); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(waitLimit))
	_, data, err := ws.ReadMessage()
	if err != nil || !bytes.HasPrefix(data, []byte(`{"request-id":7,`)) {
		t.Fatalf("raw reply %s, %v", data, err)
	}
}

func TestRequestFraming(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	ctx := t.Context()
	if err := c.Call(ctx, "Test", 2, "", "Echo", nil, nil); err != nil {
		t.Fatal(err)
	}
	var echoed map[string]any
	if err := c.Call(ctx, "Test", 7, "obj-1", "Echo", map[string]int{"a": 1}, &echoed); err != nil {
		t.Fatal(err)
	}
	if echoed["request-id"] != 2.0 || echoed["id"] != "obj-1" || echoed["version"] != 7.0 {
		t.Fatalf("echo = %v", echoed)
	}
	raw := p.rawRequests()
	var first map[string]any
	_ = json.Unmarshal(raw[0], &first)
	if _, ok := first["params"]; ok {
		t.Fatalf("nil args sent params: %s", raw[0])
	}
	if first["request-id"] != 1.0 || first["type"] != "Test" || first["request"] != "Echo" || first["version"] != 2.0 {
		t.Fatalf("first request %s", raw[0])
	}
	if !bytes.Contains(raw[1], []byte(`"params":{"a":1}`)) {
		t.Fatalf("second request %s", raw[1])
	}
}

func TestConcurrentCallsOutOfOrder(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	ctx := t.Context()
	const echoes, gathered = 64, 8
	var wg sync.WaitGroup
	errs := make(chan error, echoes+gathered)
	for i := range echoes {
		wg.Go(func() {
			var got struct {
				Params struct{ V int } `json:"params"`
			}
			if err := c.Call(ctx, "Test", 1, "", "Echo", map[string]int{"v": i}, &got); err != nil {
				errs <- err
			} else if got.Params.V != i {
				errs <- fmt.Errorf("echo %d got %d", i, got.Params.V)
			}
		})
	}
	// The peer answers these only when all have arrived, in reverse order.
	for i := range gathered {
		wg.Go(func() {
			var got struct{ N, V int }
			if err := c.Call(ctx, "Test", 1, "", "Gather", map[string]int{"n": gathered, "v": i}, &got); err != nil {
				errs <- err
			} else if got.V != i {
				errs <- fmt.Errorf("gather %d got %d", i, got.V)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ids := map[uint64]bool{}
	for _, r := range p.requests() {
		if ids[r.RequestID] || r.RequestID == 0 || r.RequestID > echoes+gathered {
			t.Fatalf("bad or duplicate request-id %d", r.RequestID)
		}
		ids[r.RequestID] = true
	}
}

// Go completes each call once, from the reader, with the decoded result
// or the error reply; a done may start the next call.
func TestGo(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	const echoes, gathered = 32, 4
	type result struct {
		i   int
		got int
		err error
	}
	results := make(chan result, echoes+gathered+1)
	for i := range echoes {
		var got struct {
			Params struct{ V int } `json:"params"`
		}
		c.Go("Test", 1, "", "Echo", map[string]int{"v": i}, &got, func(err error) {
			results <- result{i, got.Params.V, err}
		})
	}
	// Answered only once all have arrived, in reverse order.
	for i := range gathered {
		var got struct{ N, V int }
		c.Go("Test", 1, "", "Gather", map[string]int{"n": gathered, "v": i}, &got, func(err error) {
			results <- result{echoes + i, echoes + got.V, err}
		})
	}
	seen := map[int]bool{}
	for range echoes + gathered {
		select {
		case r := <-results:
			if r.err != nil || r.got != r.i || seen[r.i] {
				t.Fatalf("call %d: got %d, %v (seen before: %v)", r.i, r.got, r.err, seen[r.i])
			}
			seen[r.i] = true
		case <-time.After(waitLimit):
			t.Fatalf("only %d of %d calls completed", len(seen), echoes+gathered)
		}
	}

	// A chain: each done starts the next call, as a watcher's next Next.
	chained := make(chan error, 1)
	var step func(n int)
	step = func(n int) {
		var got struct {
			Params struct{ V int } `json:"params"`
		}
		c.Go("Test", 1, "", "Echo", map[string]int{"v": n}, &got, func(err error) {
			switch {
			case err != nil:
				chained <- err
			case got.Params.V != n:
				chained <- fmt.Errorf("step %d got %d", n, got.Params.V)
			case n == 5:
				chained <- nil
			default:
				step(n + 1)
			}
		})
	}
	step(0)
	select {
	case err := <-chained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("chain of calls did not complete")
	}

	errc := make(chan error, 1)
	c.Go("Test", 1, "", "Fail", nil, nil, func(err error) { errc <- err })
	select {
	case err := <-errc:
		if !IsCode(err, params.CodeNotFound) {
			t.Fatalf("error reply: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("error reply did not complete the call")
	}
}

// Calls started by Go fail with the connection: those pending when it ends,
// and those started after.
func TestGoFailsWithTheConnection(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	const n = 3
	errs := make(chan error, n+1)
	for range n {
		c.Go("Test", 1, "", "Block", nil, nil, func(err error) { errs <- err })
	}
	waitHeld(t, p, n)
	err := c.Call(t.Context(), "Test", 1, "", "CloseWith", map[string]int{"code": websocket.CloseGoingAway}, nil)
	if !errors.Is(err, ErrConnClosed) {
		t.Fatalf("CloseWith: %v", err)
	}
	for range n {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrConnClosed) {
				t.Fatalf("pending call: %v", err)
			}
		case <-time.After(waitLimit):
			t.Fatal("a pending call was not completed when the connection ended")
		}
	}
	c.Go("Test", 1, "", "Echo", nil, nil, func(err error) { errs <- err })
	if err := <-errs; !errors.Is(err, ErrConnClosed) { // run by Go itself
		t.Fatalf("later call: %v", err)
	}
	c.Go("Test", 1, "", "Echo", func() {}, nil, func(err error) { errs <- err })
	if err := <-errs; err == nil || errors.Is(err, ErrConnClosed) {
		t.Fatalf("unencodable params: %v", err)
	}
}

func TestErrorReply(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	result := map[string]any{}
	err := c.Call(t.Context(), "Test", 1, "", "Fail", nil, &result)
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Message != "boom" || pe.Code != params.CodeNotFound || pe.Info["k"] != "v" {
		t.Fatalf("err = %#v", err)
	}
	if !IsCode(err, params.CodeNotFound) || IsCode(err, params.CodeStopped) || IsCode(nil, "") || params.ErrCode(err) != "not found" {
		t.Fatal("IsCode/ErrCode mismatch")
	}
	if len(result) != 0 {
		t.Fatalf("result decoded from an error reply: %v", result)
	}
	err = c.Call(t.Context(), "Test", 1, "", "ErrorEmptyResponse", nil, nil)
	if !errors.As(err, &pe) || pe.Code != "" {
		t.Fatalf("an empty error key must still fail the call, got %#v", err)
	}
	err = c.Call(t.Context(), "Nope", 1, "", "X", nil, nil)
	if !IsCode(err, params.CodeNotImplemented) {
		t.Fatalf("err = %v", err)
	}
	if err := c.Call(t.Context(), "Test", 1, "", "Echo", nil, nil); err != nil {
		t.Fatalf("connection unusable after error replies: %v", err)
	}
}

func TestV0Replies(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	var got struct{ V0 bool }
	if err := c.Call(t.Context(), "Test", 1, "", "V0", nil, &got); err != nil || !got.V0 {
		t.Fatalf("V0 success: %v %+v", err, got)
	}
	err := c.Call(t.Context(), "Test", 1, "", "V0", map[string]bool{"fail": true}, nil)
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Message != "v0 boom" || pe.Code != params.CodeStopped {
		t.Fatalf("V0 error: %#v", err)
	}
}

func TestUnmatchedRepliesDropped(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	var got struct{ OK bool }
	if err := c.Call(t.Context(), "Test", 1, "", "Unmatched", nil, &got); err != nil || !got.OK {
		t.Fatalf("%v %+v", err, got)
	}
	if c.Err() != nil {
		t.Fatalf("connection ended: %v", c.Err())
	}
}

func TestContextCancel(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))

	ctx, cancel := context.WithCancel(t.Context())
	res := make(chan error, 1)
	go func() { res <- c.Call(ctx, "Test", 1, "", "Block", nil, nil) }()
	waitHeld(t, p, 1)
	cancel()
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}

	dctx, dcancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer dcancel()
	if err := c.Call(dctx, "Test", 1, "", "Block", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	waitHeld(t, p, 1)

	// An already-cancelled context sends nothing.
	n := len(p.rawRequests())
	if err := c.Call(ctx, "Test", 1, "", "Echo", nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if len(p.rawRequests()) != n {
		t.Fatal("a call with a done context was sent")
	}

	// The late replies are dropped and the connection keeps working.
	if err := c.Call(t.Context(), "Test", 1, "", "Release", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(t.Context(), "Test", 1, "", "Echo", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	left := len(c.pending)
	c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d pending entries left", left)
	}
}

func TestServerCloseFailsPending(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	const n = 3
	errs := make(chan error, n)
	for range n {
		go func() { errs <- c.Call(t.Context(), "Test", 1, "", "Block", nil, nil) }()
	}
	waitHeld(t, p, n)
	err := c.Call(t.Context(), "Test", 1, "", "CloseWith", map[string]int{"code": websocket.CloseMessageTooBig}, nil)
	if !errors.Is(err, ErrConnClosed) {
		t.Fatalf("CloseWith: %v", err)
	}
	for range n {
		if err := <-errs; !errors.Is(err, ErrConnClosed) {
			t.Fatalf("pending call: %v", err)
		}
	}
	waitDone(t, c)
	if c.CloseCode() != websocket.CloseMessageTooBig {
		t.Fatalf("CloseCode = %d", c.CloseCode())
	}
	var ce *websocket.CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Fatalf("Err = %v", c.Err())
	}
	if err := c.Call(t.Context(), "Test", 1, "", "Echo", nil, nil); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("later call: %v", err)
	}
	if err := c.Ping(t.Context()); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("later ping: %v", err)
	}
}

func TestConnectionEndings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int64
		method string
		args   any
		code   int
		cause  error
		text   string
	}{
		{"read limit", 4096, "Big", map[string]int{"size": 10000}, websocket.CloseMessageTooBig, websocket.ErrReadLimit, ""},
		{"abrupt drop", 0, "Drop", nil, websocket.CloseAbnormalClosure, nil, ""},
		{"malformed reply", 0, "Garbage", nil, websocket.CloseProtocolError, nil, "malformed message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPeer(t)
			cfg := p.config("")
			cfg.ReadLimit = tc.limit
			c := dialT(t, cfg)
			err := c.Call(t.Context(), "Test", 1, "", tc.method, tc.args, nil)
			if !errors.Is(err, ErrConnClosed) {
				t.Fatalf("err = %v", err)
			}
			waitDone(t, c)
			if c.CloseCode() != tc.code {
				t.Fatalf("CloseCode = %d, want %d (%v)", c.CloseCode(), tc.code, c.Err())
			}
			if tc.cause != nil && !errors.Is(c.Err(), tc.cause) {
				t.Fatalf("Err = %v", c.Err())
			}
			if !strings.Contains(c.Err().Error(), tc.text) {
				t.Fatalf("Err = %v", c.Err())
			}
		})
	}
}

func TestWatchers(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(testModelUUID))
	ctx := t.Context()

	nw := NewNotifyWatcher(c, "1")
	if err := nw.Next(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nw.Next(ctx); !IsCode(err, params.CodeStopped) {
		t.Fatalf("Next after Stop: %v", err)
	}
	if err := nw.Stop(ctx); !IsCode(err, params.CodeNotFound) {
		t.Fatalf("second Stop: %v", err)
	}
	if err := NewNotifyWatcher(c, "99").Next(ctx); !IsCode(err, params.CodeNotFound) {
		t.Fatalf("unknown id: %v", err)
	}

	sw := NewStringsWatcher(c, "2")
	changes, err := sw.Next(ctx)
	if err != nil || strings.Join(changes, ",") != "0,0/lxd/1" {
		t.Fatalf("changes %v, %v", changes, err)
	}
	type next struct {
		changes []string
		err     error
	}
	nexts := make(chan next, 1)
	sw.GoNext(func(changes []string, err error) { nexts <- next{changes, err} })
	select {
	case r := <-nexts:
		if r.err != nil || strings.Join(r.changes, ",") != "0,0/lxd/1" {
			t.Fatalf("GoNext: changes %v, %v", r.changes, r.err)
		}
	case <-time.After(waitLimit):
		t.Fatal("GoNext did not complete")
	}
	if err := sw.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range p.requests() {
		if r.Params != nil || r.Version != 1 || (r.ID != "1" && r.ID != "2" && r.ID != "99") {
			t.Fatalf("watcher request %+v", r)
		}
	}
}

func TestPinger(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	if err := c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-p.pings
	c.StartPinger(time.Millisecond)
	c.StartPinger(time.Millisecond) // a second pinger is not started
	for range 3 {
		select {
		case <-p.pings:
		case <-time.After(waitLimit):
			t.Fatal("pinger did not ping")
		}
	}
	if r := p.requests()[1]; r.Type != "Pinger" || r.Version != 1 || r.Request != "Ping" {
		t.Fatalf("ping request %+v", r)
	}
	_ = c.Close()
	if c.CloseCode() != websocket.CloseNormalClosure {
		t.Fatalf("CloseCode = %d", c.CloseCode())
	}
}

func TestPingerClosesOnBlockedPing(t *testing.T) {
	p := newPeer(t)
	p.blockPings.Store(true)
	cfg := p.config("")
	cfg.PingTimeout = 50 * time.Millisecond
	c := dialT(t, cfg)
	c.StartPinger(time.Millisecond)
	waitDone(t, c)
	if !errors.Is(c.Err(), ErrConnClosed) || !errors.Is(c.Err(), ErrPingFailed) ||
		!errors.Is(c.Err(), context.DeadlineExceeded) || !strings.Contains(c.Err().Error(), "ping failed") {
		t.Fatalf("Err = %v", c.Err())
	}
	if c.CloseCode() != websocket.CloseGoingAway {
		t.Fatalf("CloseCode = %d", c.CloseCode())
	}
	// The unanswered ping was the only one: the next is sent an interval
	// after the reply, as Juju's client's heartbeat does, not on a ticker.
	pings := 0
	for _, r := range p.requests() {
		if r.Type == "Pinger" {
			pings++
		}
	}
	if pings != 1 {
		t.Fatalf("%d pings sent, want 1", pings)
	}
}

// OnEnd's functions run once the connection has ended, after its pending
// calls have failed; one registered after that runs at once.
func TestOnEnd(t *testing.T) {
	p := newPeer(t)
	c := dialT(t, p.config(""))
	failed := make(chan error, 1)
	c.Go("Test", 1, "", "Block", nil, nil, func(err error) { failed <- err })
	waitHeld(t, p, 1)
	ended := make(chan error, 2)
	c.OnEnd(func() {
		select {
		case err := <-failed:
			ended <- err
		default:
			ended <- errors.New("OnEnd ran before the pending call failed")
		}
	})
	_ = c.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, ErrConnClosed) {
			t.Fatalf("pending call: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("OnEnd's function did not run")
	}
	ran := false
	c.OnEnd(func() { ran = true })
	if !ran || len(ended) != 0 {
		t.Fatalf("after the end: ran %v, %d more runs", ran, len(ended))
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	p := newPeer(t)

	c, err := Dial(t.Context(), p.config(testModelUUID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoginUser(t.Context(), "admin", "pw"); err != nil {
		t.Fatal(err)
	}
	c.StartPinger(time.Millisecond)
	select {
	case <-p.pings:
	case <-time.After(waitLimit):
		t.Fatal("pinger did not ping")
	}
	blocked := make(chan error, 1)
	go func() { blocked <- c.Call(context.Background(), "Test", 1, "", "Block", nil, nil) }()
	waitHeld(t, p, 1)

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close waits for the Conn's goroutines; they may at most still be
	// unwinding their final deferred calls.
	leaktest.WaitAtMost(t, 0, "rpc/client.(*Conn).")
	if err := <-blocked; !errors.Is(err, ErrConnClosed) {
		t.Fatalf("blocked call: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if c.CloseCode() != websocket.CloseNormalClosure || !errors.Is(c.Err(), ErrConnClosed) {
		t.Fatalf("CloseCode %d Err %v", c.CloseCode(), c.Err())
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	c.StartPinger(time.Millisecond) // no-op after Close
	if err := c.Call(t.Context(), "Test", 1, "", "Echo", nil, nil); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("call after Close: %v", err)
	}

	// The peer's side of this connection ends too once it sees the close
	// frame: no goroutine of this test's peer is left (counted exactly, not
	// against a process-wide baseline).
	for deadline := time.Now().Add(waitLimit); p.serving.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d peer connection(s) still served after Close", p.serving.Load())
		}
	}
}

// TestSmallBuffersAndLocalAddr: a connection with small I/O buffers still
// sends and receives messages larger than them, and LocalAddr binds the
// socket to the given loopback address.
func TestSmallBuffersAndLocalAddr(t *testing.T) {
	p := newPeer(t)
	cfg := p.config(testModelUUID)
	cfg.ReadBufferSize, cfg.WriteBufferSize = 512, 512
	cfg.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	c := dialT(t, cfg)
	if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.2" {
		t.Fatalf("local address %s, want 127.0.0.2", got)
	}
	big := strings.Repeat("x", 8<<10)
	if _, err := c.LoginUser(t.Context(), "admin", big); err != nil {
		t.Fatalf("LoginUser: %v", err)
	}
	if r := p.requests()[0]; !bytes.Contains(r.Params, []byte(big)) {
		t.Fatalf("the large request did not arrive whole (%d bytes of params)", len(r.Params))
	}
}

// The handshake offers Go's key exchanges by default, so a server of this
// Go (the daemon's defaults) agrees the post-quantum hybrid; with
// JujuAgentCurves it offers what a Juju agent built with Go 1.21 offers,
// and the same server agrees X25519.
func TestCurvePreferences(t *testing.T) {
	p := newPeer(t)
	dialT(t, p.config(testModelUUID))
	cfg := p.config(testModelUUID)
	cfg.CurvePreferences = JujuAgentCurves
	cfg.NoSessionCache = true
	dialT(t, cfg)
	p.mu.Lock()
	defer p.mu.Unlock()
	if want := []tls.CurveID{tls.X25519MLKEM768, tls.X25519}; len(p.curves) != 2 || p.curves[0] != want[0] || p.curves[1] != want[1] {
		t.Fatalf("key exchanges agreed %v, want %v", p.curves, want)
	}
}
