package rpc_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/tlsrecord"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// tapListener wraps the server's TCP connections (under TLS) in tapConns.
type tapListener struct {
	net.Listener
	accepted chan *tapConn
}

func newTap() *tapListener { return &tapListener{accepted: make(chan *tapConn, 16)} }

func (l *tapListener) wrap(ln net.Listener) net.Listener {
	l.Listener = ln
	return l
}

func (l *tapListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &tapConn{Conn: nc}
	select {
	case l.accepted <- c:
	default:
	}
	return c, nil
}

// conn returns the server side of the next accepted connection.
func (l *tapListener) conn(t testing.TB) *tapConn {
	t.Helper()
	select {
	case c := <-l.accepted:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted after 10s")
		return nil
	}
}

// tapConn counts what the server writes to the socket: write calls (each
// one write syscall) with their sizes, and the TLS records in them. While
// held, a write waits until release.
type tapConn struct {
	net.Conn

	mu      sync.Mutex
	sizes   []int             // of each write
	out, in tlsrecord.Counter // TLS records written, read
	hold    chan struct{}
	held    chan struct{}
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in.Add(p[:n])
	c.mu.Unlock()
	return n, err
}

// recordsRead is how many TLS records the server has read.
func (c *tapConn) recordsRead() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.in.Records()
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(p))
	c.out.Add(p)
	hold, held := c.hold, c.held
	c.mu.Unlock()
	if hold != nil {
		select {
		case held <- struct{}{}:
		default:
		}
		<-hold
	}
	return c.Conn.Write(p)
}

// holdWrites makes the next writes wait until release.
func (c *tapConn) holdWrites() {
	c.mu.Lock()
	c.hold, c.held = make(chan struct{}), make(chan struct{}, 1)
	c.mu.Unlock()
}

// waitHeld waits (bounded) until a write is waiting.
func (c *tapConn) waitHeld(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no write waiting after 10s")
	}
}

func (c *tapConn) release() {
	c.mu.Lock()
	close(c.hold)
	c.hold = nil
	c.mu.Unlock()
}

// counts returns the writes so far, with their sizes, and the TLS records.
func (c *tapConn) counts() (sizes []int, records int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.sizes...), c.out.Records()
}

// takeAll removes and returns the waiting Later replies, oldest first,
// once n are waiting.
func (l *laterCalls) takeAll(t testing.TB, n int) []func(any, error) {
	t.Helper()
	l.waitFor(t, n)
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := l.replies
	l.replies = nil
	return rs
}

// startLaterCalls sends n Later requests (request-ids 1..n) on a raw
// websocket of a server whose TCP connections are tapped, and returns
// their reply functions in request order and the server side of the
// connection.
func startLaterCalls(t testing.TB, mod func(*rpc.Config), n int) (*websocket.Conn, *tapConn, []func(any, error), *testServer) {
	t.Helper()
	tap := newTap()
	ts := startServerOn(t, mod, tap.wrap)
	ws := ts.dialRaw(t)
	sc := tap.conn(t)
	var reps []func(any, error)
	// One at a time, so the reply functions are in request order.
	for i := 1; i <= n; i++ {
		send(t, ws, fmt.Sprintf(`{"request-id":%d,"type":"T","version":1,"request":"Later"}`, i))
		reps = append(reps, ts.root.later.takeAll(t, 1)...)
	}
	// Every call has started (a reply given while its call starts is
	// sent when the start returns, from the handler).
	waitConnGoroutines(t, 1)
	return ws, sc, reps, ts
}

// readReplies reads the replies to request-ids from..to, in that order,
// and checks each carries the result its reply function was given.
func readReplies(t testing.TB, ws *websocket.Conn, from, to int, result func(int) string) {
	t.Helper()
	for i := from; i <= to; i++ {
		m := readRaw(t, ws)
		if id, _ := m["request-id"].(float64); int(id) != i {
			t.Fatalf("reply %v, want request-id %d (replies in the order given)", m, i)
		}
		resp, _ := m["response"].(map[string]any)
		if got, _ := resp["result"].(string); got != result(i) {
			t.Fatalf("reply %d: result of %d bytes, want %d", i, len(got), len(result(i)))
		}
	}
}

func smallResult(i int) string { return fmt.Sprintf("r%d", i) }

// Replies given together (one commit waking a connection's watchers) are
// written together: the server writes them to the socket as one TLS
// record in one write, in the order they were given.
func TestRepliesGivenTogetherAreWrittenTogether(t *testing.T) {
	const n = 11
	ws, sc, reps, _ := startLaterCalls(t, nil, n)

	sc.holdWrites()
	reps[0](params.StringResult{Result: smallResult(1)}, nil)
	sc.waitHeld(t) // the first reply's write waits; the drain is busy
	before, recBefore := sc.counts()
	for i := 2; i <= n; i++ {
		reps[i-1](params.StringResult{Result: smallResult(i)}, nil)
	}
	sc.release()
	readReplies(t, ws, 1, n, smallResult)

	after, recAfter := sc.counts()
	if writes, records := len(after)-len(before), recAfter-recBefore; writes != 1 || records != 1 {
		t.Fatalf("%d replies given together went out in %d socket writes (%v) and %d TLS records; want 1 and 1",
			n-1, writes, after[len(before):], records)
	}
}

// A batch keeps the connection's bounds: the replies queued at once hold
// at most MaxUnsent bytes between them, so a batch is cut there; none is
// lost or reordered.
func TestBatchesKeepTheUnsentBound(t *testing.T) {
	const n, maxUnsent = 200, 2 << 10
	ws, sc, reps, _ := startLaterCalls(t, func(c *rpc.Config) { c.MaxUnsent = maxUnsent }, n)
	sc.holdWrites()
	reps[0](params.StringResult{Result: smallResult(1)}, nil)
	sc.waitHeld(t)
	before, _ := sc.counts()
	for i := 2; i <= n; i++ {
		reps[i-1](params.StringResult{Result: smallResult(i)}, nil)
	}
	sc.release()
	readReplies(t, ws, 1, n, smallResult)

	after, _ := sc.counts()
	writes := after[len(before):]
	// Each write holds one batch: at most maxUnsent bytes of replies,
	// plus a 2-byte frame header each and a TLS record's 22 bytes.
	for _, size := range writes {
		if size > maxUnsent+maxUnsent/2+22 {
			t.Fatalf("a socket write of %d bytes; the replies of a batch hold at most %d", size, maxUnsent)
		}
	}
	if len(writes) > n/10 {
		t.Fatalf("%d replies in %d socket writes; want them batched", n-1, len(writes))
	}
	t.Logf("%d replies in %d socket writes %v", n-1, len(writes), writes)
}

// A reply larger than a TLS record in a batch is written whole between
// its neighbours.
func TestBatchWithALargeReply(t *testing.T) {
	const n = 5
	large := strings.Repeat("x", 40<<10)
	result := func(i int) string {
		if i == 3 {
			return large
		}
		return smallResult(i)
	}
	ws, sc, reps, _ := startLaterCalls(t, nil, n)
	sc.holdWrites()
	reps[0](params.StringResult{Result: result(1)}, nil)
	sc.waitHeld(t)
	for i := 2; i <= n; i++ {
		reps[i-1](params.StringResult{Result: result(i)}, nil)
	}
	sc.release()
	readReplies(t, ws, 1, n, result)
}

// Writes of a connection still fail as they did: a client that stops
// reading is disconnected after the write timeout, also when its replies
// are batched.
func TestBatchWriteTimeout(t *testing.T) {
	const n = 64
	large := strings.Repeat("y", 64<<10)
	ws, _, reps, ts := startLaterCalls(t, func(c *rpc.Config) { c.WriteTimeout = 200 * time.Millisecond }, n)
	// The client reads nothing: the socket buffers fill, a write times
	// out and the server ends the connection.
	for i := 1; i <= n; i++ {
		reps[i-1](params.StringResult{Result: large}, nil)
	}
	waitConns(t, ts, 0) // the connection ends after its writes stalled
	// What the server managed to send is whole frames, then the end.
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			break
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("a frame of %d bytes is not a whole reply: %v", len(data), err)
		}
	}
}

// Our client keeps the TLS sessions the server's tickets give it: the
// second connection to a server resumes the first one's session, a
// connection with another cache (or none) makes a full handshake.
func TestClientResumesTLSSession(t *testing.T) {
	ts := startServer(t, nil)
	dial := func(cfg client.Config) *client.Conn {
		t.Helper()
		cfg.Addr, cfg.CACert = ts.addr, ts.ca
		c, err := client.Dial(ctxT(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// A call's round trip: the ticket, sent after the handshake,
		// has been read by then.
		if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
			t.Fatal(err)
		}
		return c
	}
	cache := tls.NewLRUClientSessionCache(4)
	if dial(client.Config{SessionCache: cache}).ConnectionState().DidResume {
		t.Fatal("the first connection resumed a session")
	}
	if !dial(client.Config{SessionCache: cache}).ConnectionState().DidResume {
		t.Fatal("the second connection with the same cache did not resume the first one's session")
	}
	if dial(client.Config{SessionCache: tls.NewLRUClientSessionCache(4)}).ConnectionState().DidResume {
		t.Fatal("a connection with a new cache resumed a session")
	}
	if dial(client.Config{SessionCache: cache, NoSessionCache: true}).ConnectionState().DidResume {
		t.Fatal("a connection with NoSessionCache resumed a session")
	}
	// The default cache, shared by the process.
	dial(client.Config{})
	if !dial(client.Config{}).ConnectionState().DidResume {
		t.Fatal("the second connection with the default cache did not resume")
	}
}

// Our client gathers the calls it sends while it dispatches the replies of
// one read (a watcher's next Next, sent from the reply's completion): the
// server reads them as one TLS record.
func TestClientGathersCallsSentFromCompletions(t *testing.T) {
	const n = 10
	tap := newTap()
	ts := startServerOn(t, nil, tap.wrap)
	c := ts.dial(t)
	sc := tap.conn(t)
	// n Later calls whose completions each send one Nothing call.
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for range n {
		wg.Add(1)
		c.Go("T", 1, "", "Later", nil, nil, func(err error) {
			if err != nil {
				errs <- err
				wg.Done()
				return
			}
			c.Go("T", 1, "", "Nothing", nil, nil, func(err error) {
				if err != nil {
					errs <- err
				}
				wg.Done()
			})
		})
	}
	reps := ts.root.later.takeAll(t, n)
	waitConnGoroutines(t, 1)
	sc.holdWrites()
	reps[0](params.StringResult{Result: "first"}, nil) // its write waits
	sc.waitHeld(t)
	for _, r := range reps[1:] {
		r(params.StringResult{Result: "later"}, nil)
	}
	before := sc.recordsRead()
	sc.release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The first reply came alone, its Nothing call in a record of its
	// own; the other n-1 replies came in one record, their n-1 calls
	// leave in one.
	if got := sc.recordsRead() - before; got != 2 {
		t.Fatalf("the server read the %d calls sent from the completions in %d TLS records; want 2 (1 + %d)", n, got, n-1)
	}
}
