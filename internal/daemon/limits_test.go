package daemon_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/internal/connlimit"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Limits and slow clients. The watcher limit and the login
// timeout are TestWatcherLimit and TestLoginTimeout (daemon_test.go).

// The connection cap (--max-connections) counts accepted TCP connections,
// and holds when many clients connect at once: over it a new connection
// is dropped before its TLS handshake (the dial fails with a reset or an
// EOF), and the open connections keep working; a freed slot can be used
// again.
func TestConnectionLimit(t *testing.T) {
	const limit = 3
	d := start(t, func(c *daemon.Config) { c.MaxConns = limit })
	creds := d.Credentials()
	cfg := client.Config{Addr: d.Addr(), ModelUUID: creds.DefaultModelUUID, CACert: []byte(creds.CACert)}

	// Many dials at once: at most limit get in.
	var (
		mu    sync.Mutex
		conns []*client.Conn
		wg    sync.WaitGroup
		fails atomic.Int32
	)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctxT(t), cfg)
			if err != nil {
				if !droppedConn(err) {
					t.Errorf("refused dial: %v", err)
				}
				fails.Add(1)
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if len(conns) != limit || d.RPC().Conns() > limit || d.TCPConns() > limit {
		t.Fatalf("%d connections accepted, %d API and %d TCP open; the limit is %d", len(conns), d.RPC().Conns(), d.TCPConns(), limit)
	}
	for _, c := range conns {
		if _, err := c.LoginUser(ctxT(t), "admin", creds.AdminPassword); err != nil {
			t.Fatalf("login on an accepted connection: %v", err)
		}
	}
	// A freed slot is usable again.
	conns[0].Close()
	waitFor(t, "the closed connection to end", func() bool { return d.TCPConns() == limit-1 })
	c, err := client.Dial(ctxT(t), cfg)
	if err != nil {
		t.Fatalf("dial after a slot was freed: %v", err)
	}
	c.Close()
	for _, c := range conns[1:] {
		if err := c.Ping(ctxT(t)); err != nil {
			t.Fatalf("open connection: %v", err)
		}
		c.Close()
	}
	waitFor(t, "the connections to end", func() bool { return d.TCPConns() == 0 })
	if m := metricsText(t, d, nil); !strings.Contains(m, `provisiond_connections_refused_total{listener="api",reason="cap"} `+strconv.Itoa(int(fails.Load()))) {
		t.Errorf("/metrics does not count %d refused connections:\n%s", fails.Load(), grepLines(m, "refused"))
	}
}

// droppedConn reports an error of a dial whose connection the server
// dropped at once (the connection cap), as opposed to a TLS or HTTP error.
func droppedConn(err error) bool {
	msg := err.Error()
	for _, s := range []string{"connection reset by peer", "EOF", "broken pipe"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// HTTP keep-alive connections count against the connection cap like API
// connections (uncounted, 1,013 idle /health connections made an admin
// login time out), and the server closes them once idle for
// --idle-timeout, which frees their slots.
func TestIdleKeepAliveCountedAndClosed(t *testing.T) {
	const limit, idle = 4, 3 * time.Second
	d := start(t, func(c *daemon.Config) { c.MaxConns = limit; c.IdleTimeout = idle })
	creds := d.Credentials()
	// limit clients, each with its own keep-alive connection after one
	// GET /health.
	var transports []*http.Transport
	for i := 0; i < limit; i++ {
		tr := httpsTransport(d)
		transports = append(transports, tr)
		resp, err := (&http.Client{Transport: tr}).Get("https://" + d.Addr() + "/health")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	t.Cleanup(func() {
		for _, tr := range transports {
			tr.CloseIdleConnections()
		}
	})
	if n := d.TCPConns(); n != limit {
		t.Fatalf("%d TCP connections open after %d keep-alive GETs", n, limit)
	}
	// The cap is full: an agent cannot connect.
	cfg := client.Config{Addr: d.Addr(), ModelUUID: creds.DefaultModelUUID, CACert: []byte(creds.CACert)}
	if c, err := client.Dial(ctxT(t), cfg); err == nil {
		c.Close()
		t.Fatal("dial succeeded with the cap full of keep-alive connections")
	} else if !droppedConn(err) {
		t.Fatalf("dial over the cap: %v", err)
	}
	// Idle, they are closed, and the admin gets in.
	start := time.Now()
	waitFor(t, "idle keep-alive connections to be closed", func() bool { return d.TCPConns() == 0 })
	if el := time.Since(start); el > idle+5*time.Second {
		t.Errorf("idle connections closed after %v (idle timeout %v)", el, idle)
	}
	loginAdmin(t, d, creds.DefaultModelUUID)
}

// HTTP request headers are capped (--max-header-bytes): about 1 MB of
// headers on each of 1,500 connections held 1.8 GB. Over the cap the
// request gets 431 and the server goes on serving.
func TestHeaderLimit(t *testing.T) {
	d := start(t, func(c *daemon.Config) { c.MaxHeaderBytes = 8 << 10 })
	tr := httpsTransport(d)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	req, _ := http.NewRequest(http.MethodGet, "https://"+d.Addr()+"/health", nil)
	req.Header.Set("X-Filler", strings.Repeat("x", 64<<10))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("GET with 64 KiB of headers: %s; want 431", resp.Status)
	}
	loginAdmin(t, d, d.Credentials().DefaultModelUUID)
}

// Before login a message may be at most --prelogin-read-limit (64 KiB)
// and a connection serves one request at a time. At a small scale of the
// attack (1,000 connections each sending all but the end of a near-4 MiB
// message held 5.8 GB): connections each send all but the end of a
// message just under the limit. What the daemon holds per connection
// stays under the worst case the default --max-connections is sized by
// (connlimit.ConnWorstCase), and an admin still logs in meanwhile.
func TestPreLoginMemoryBound(t *testing.T) {
	const conns = 200
	d := start(t, nil)
	model := d.Credentials().DefaultModelUUID
	perConn, held := preLoginAttack(t, d, model, conns, rpc.DefaultPreLoginReadLimit)
	// The heap is the test's too: its side of each connection (a TLS
	// connection after an upgrade by hand, a few KiB) is counted in.
	t.Logf("%d connections holding %d bytes of a message each: daemon heap +%d KiB per connection (bound %d KiB)",
		conns, held, perConn>>10, connlimit.ConnWorstCase>>10)
	if perConn > connlimit.ConnWorstCase {
		t.Errorf("the daemon holds %d KiB per connection before login; the bound is %d KiB", perConn>>10, connlimit.ConnWorstCase>>10)
	}
	loginAdmin(t, d, model)
}

// preLoginAttack opens conns connections that each send, before login,
// all but the last 1 KiB of a message of limit bytes, and returns the
// daemon's heap growth per connection once it has read it all, and the
// bytes each sent.
func preLoginAttack(t *testing.T, d *daemon.Daemon, model string, conns int, limit int64) (perConn int64, held int) {
	t.Helper()
	held = int(limit) - 1<<10
	payload := bytes.Repeat([]byte("x"), held)
	base := heapAlloc()
	for i := 0; i < conns; i++ {
		// A text frame that announces the whole message, of which all but
		// the end is sent.
		sendPartialFrame(t, upgradeByHand(t, d, model), int(limit)-1, payload)
	}
	// Wait until the daemon has read nearly all of it, then take the
	// heap: what it holds for the partial messages, and what it holds per
	// connection besides.
	var grown int64
	waitFor(t, "the daemon to read the partial messages", func() bool {
		grown = int64(heapAlloc()) - int64(base)
		return grown >= int64(conns)*int64(held)*9/10
	})
	return grown / int64(conns), held
}

// upgradeByHand opens an API websocket on model with a TLS connection and
// an upgrade request written by hand, so the client side holds little
// memory (no websocket library buffers), and returns the connection.
func upgradeByHand(t *testing.T, d *daemon.Daemon, model string) net.Conn {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	c, err := tls.Dial("tcp", d.Addr(), &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET /model/%s/api HTTP/1.1\r\nHost: juju-apiserver\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", model)
	// Read the 101 response byte by byte, so nothing after it is lost in a
	// buffer.
	var resp []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(resp, []byte("\r\n\r\n")) {
		if _, err := c.Read(b); err != nil {
			t.Fatalf("upgrade response %q: %v", resp, err)
		}
		resp = append(resp, b[0])
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101 ")) {
		t.Fatalf("upgrade response %q", resp)
	}
	return c
}

// sendPartialFrame writes on c the header of a final, masked text frame
// of size bytes and then payload (fewer bytes): the message is never
// finished.
func sendPartialFrame(t *testing.T, c net.Conn, size int, payload []byte) {
	t.Helper()
	hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // FIN, text; masked, 64-bit length; mask key 0
	binary.BigEndian.PutUint64(hdr[2:10], uint64(size))
	if _, err := c.Write(append(hdr, payload...)); err != nil {
		t.Fatal(err)
	}
}

// Over the per-connection request cap a request gets code "try again"
// with a clear message, and the connection stays.
func TestRequestLimitPerConnection(t *testing.T) {
	d := start(t, func(c *daemon.Config) { c.MaxRequests = 2 })
	c := loginController(t, d, d.Credentials().DefaultModelUUID)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	// Two Next calls that block hold both slots.
	for i := 0; i < 2; i++ {
		var res params.NotifyWatchResult
		if err := c.Call(ctxT(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &res); err != nil {
			t.Fatal(err)
		}
		go func() {
			for client.IsCode(client.NewNotifyWatcher(c, res.NotifyWatcherId).Next(ctx), params.CodeTryAgain) {
			}
		}()
	}
	var err error
	waitFor(t, "the request limit", func() bool {
		err = c.Ping(ctxT(t))
		return err != nil
	})
	wantErr(t, err, "too many concurrent requests on this connection (limit 2)", params.CodeTryAgain)
	// A change ends both Next calls; the slots are free again.
	if err := d.State().UpdateModelConfig(t.Context(), d.Credentials().DefaultModelUUID, map[string]any{"x": 1}, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slots to free", func() bool { return c.Ping(ctxT(t)) == nil })
}

// A client that sends requests with large replies and never reads is
// dropped after the write timeout; meanwhile another client's calls are
// answered while the slow one's writer is stuck (not after the slow one
// is dropped); the server's connection goroutines stay bounded by the
// request cap; the dropped connection's memory is released.
func TestSlowReaderDropped(t *testing.T) {
	const (
		writeTimeout = 3 * time.Second
		maxRequests  = 8
	)
	d := start(t, func(c *daemon.Config) {
		c.WriteTimeout = writeTimeout
		c.MaxRequests = maxRequests
	})
	creds := d.Credentials()
	// A model config of about 1 MiB (the most a config may hold) makes
	// every ModelConfig reply as big.
	big := strings.Repeat("x", 250<<10)
	if err := d.State().UpdateModelConfig(t.Context(), creds.DefaultModelUUID, map[string]any{"big1": big, "big2": big, "big3": big, "big4": big}, nil); err != nil {
		t.Fatal(err)
	}
	other := loginController(t, d, creds.DefaultModelUUID)
	baseHeap := heapAlloc()

	slow := newRawConn(t, d, creds.DefaultModelUUID)
	slow.login(params.LoginRequest{AuthTag: creds.ControllerAgent.Tag, Credentials: creds.ControllerAgent.Password, Nonce: creds.ControllerAgent.Nonce})
	started := time.Now()
	// Send requests without reading: the replies (hundreds of MiB in all)
	// fill the socket buffers and the server's writer blocks.
	go func() {
		for i := 0; i < 300; i++ {
			if _, err := slow.send("Provisioner", 11, "", "ModelConfig", nil); err != nil {
				return // the server dropped us
			}
		}
	}()

	// The other client keeps working while the slow one is stuck: a ping
	// that starts while the slow connection's writer is blocked writing and
	// ends before that connection is dropped was not held up by it. The
	// server's goroutines in rpc.Conn code stay bounded by the cap: the
	// slow connection's handlers (they wait for room in its reply queue),
	// its reader (which waits likewise with a "try again" reply) and its
	// writer, the other's reader, writer and handler.
	const connGoroutineCap = maxRequests + 6
	stuck := func() bool {
		return len(leaktest.Stacks("provisiond/rpc.(*Conn).writeBatch", "internal/poll.runtime_pollWait")) > 0
	}
	pingsWhileStuck, peak := 0, 0
	for d.RPC().Conns() > 1 {
		if time.Since(started) > writeTimeout+30*time.Second {
			t.Fatalf("slow reader not dropped after %v (write timeout %v)", time.Since(started), writeTimeout)
		}
		wasStuck := stuck()
		if err := other.Ping(ctxT(t)); err != nil {
			t.Fatalf("other client: %v", err)
		}
		if wasStuck && stuck() && d.RPC().Conns() > 1 {
			pingsWhileStuck++
		}
		peak = max(peak, len(leaktest.Stacks("provisiond/rpc.(*Conn).")))
		time.Sleep(20 * time.Millisecond)
	}
	dropped := time.Since(started)
	t.Logf("dropped after %v; %d pings answered while the slow writer was stuck; rpc.Conn goroutines peaked at %d", dropped, pingsWhileStuck, peak)
	if dropped < writeTimeout {
		t.Errorf("dropped after %v, before the write timeout %v", dropped, writeTimeout)
	}
	if pingsWhileStuck == 0 {
		t.Errorf("no ping of the other client was answered while the slow client's writer was stuck (write timeout %v)", writeTimeout)
	}
	if peak > connGoroutineCap {
		t.Errorf("%d goroutines in rpc.Conn code at the peak; want at most %d (request cap %d)", peak, connGoroutineCap, maxRequests)
	}
	// The slow client sees the end of the connection.
	_ = slow.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		if _, _, err := slow.ws.ReadMessage(); err != nil {
			break
		}
	}
	// Its memory is released: the heap is back near where it started.
	waitFor(t, "the heap to shrink", func() bool { return heapAlloc() < baseHeap+16<<20 })
	if err := other.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// Bulk calls: a call may hold at most --max-bulk-items
// list items, counted in the top-level lists and in the lists of their
// elements; over it the call is refused with code "quota limit exceeded"
// before any work, the connection stays, and other clients are served.
func TestBulkItemLimit(t *testing.T) {
	const limit = 100
	f := newProvFixtureWith(t, func(c *daemon.Config) { c.MaxBulkItems = limit })
	tags := make([]string, limit)
	for i := range tags {
		tags[i] = "machine-0"
	}
	rev := f.St.Revision()
	// At the limit: one result per item.
	if res := mustCall[params.LifeResults](t, f.Agent, 11, "Life", ents(tags...)); len(res.Results) != limit {
		t.Fatalf("%d results for %d items", len(res.Results), limit)
	}
	// One over it.
	_, err := call[params.LifeResults](t, f.Agent, 11, "Life", ents(append(tags, "machine-0")...))
	wantErr(t, err, "too many items in one call: 101 (limit 100); send them in smaller calls", params.CodeQuotaLimitExceeded)
	// Nested lists count too: one machine with 100 network interfaces is
	// 101 items.
	nics := make([]params.NetworkConfig, limit)
	_, err = call[params.ErrorResults](t, f.Ctrl, 11, "SetInstanceInfo", params.InstancesInfo{Machines: []params.InstanceInfo{
		{Tag: "machine-1", InstanceId: "i-1", Nonce: "n-1", NetworkConfig: nics}}})
	wantErr(t, err, "too many items in one call: 101 (limit 100); send them in smaller calls", params.CodeQuotaLimitExceeded)
	if got := f.St.Revision(); got != rev {
		t.Errorf("revision %d -> %d: a refused call wrote", rev, got)
	}
	if err := f.Agent.Ping(ctxT(t)); err != nil {
		t.Fatalf("the refused connection: %v", err)
	}
	if err := f.Admin.Ping(ctxT(t)); err != nil {
		t.Fatalf("another client: %v", err)
	}
}

// A reply over --max-reply-size is not sent: the call gets code "quota
// limit exceeded" and the connection stays.
func TestReplySizeLimit(t *testing.T) {
	const limit = 64 << 10
	f := newProvFixtureWith(t, func(c *daemon.Config) { c.MaxReplySize = limit })
	tags := make([]string, 200)
	for i := range tags {
		tags[i] = "machine-0"
	}
	_, err := call[params.ProvisioningInfoResults](t, f.Agent, 11, "ProvisioningInfo", ents(tags...))
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Code != params.CodeQuotaLimitExceeded ||
		!strings.HasPrefix(pe.Message, "reply of ") || !strings.HasSuffix(pe.Message, " bytes is over the limit of 65536 bytes; ask for fewer items") {
		t.Fatalf("ProvisioningInfo of 200 items with a 64 KiB reply limit: %v", err)
	}
	if res := mustCall[params.ProvisioningInfoResults](t, f.Agent, 11, "ProvisioningInfo", ents("machine-0")); len(res.Results) != 1 || res.Results[0].Error != nil {
		t.Fatalf("a small ProvisioningInfo afterwards: %+v", res)
	}
}

// The bulk amplification attack at a small scale: a machine agent asks
// for its own ProvisioningInfo --max-bulk-items times in each of many
// calls and never reads the replies (at full scale four 209,000-item
// calls took the daemon to 6.6 GB). The connection's calls hold at most
// --max-bulk-items items at once, its unsent replies at most --max-unsent
// bytes and its requests at most --read-limit bytes: the daemon's heap
// grows by a bounded amount until the write timeout drops the client, and
// another client's calls are answered all along.
func TestBulkAmplificationBounded(t *testing.T) {
	const (
		items        = 500
		calls        = 64
		maxUnsent    = 1 << 20
		writeTimeout = 3 * time.Second
	)
	f := newProvFixtureWith(t, func(c *daemon.Config) {
		c.MaxBulkItems = items
		c.MaxUnsent = maxUnsent
		c.WriteTimeout = writeTimeout
	})
	tags := make([]string, items)
	for i := range tags {
		tags[i] = "machine-0"
	}
	body := mustJSON(ents(tags...))
	replyJSON := rawCall(t, f.Agent, 11, "ProvisioningInfo", ents(tags...))
	reply := len(replyJSON)
	// What one call's results take as Go values (the handler's, before
	// they are encoded): the same reply decoded, measured.
	before := heapAlloc()
	var results params.ProvisioningInfoResults
	if err := json.Unmarshal(replyJSON, &results); err != nil {
		t.Fatal(err)
	}
	values := max(0, int64(heapAlloc())-int64(before))
	runtime.KeepAlive(&results)
	results = params.ProvisioningInfoResults{}
	base := heapAlloc()

	slow := newRawConn(t, f.D, f.Model)
	slow.login(params.LoginRequest{AuthTag: "machine-0", Credentials: m0Password, Nonce: m0Nonce})
	go func() {
		for i := 0; i < calls; i++ {
			if _, err := slow.send("Provisioner", 11, "", "ProvisioningInfo", body); err != nil {
				return // dropped
			}
		}
	}()
	var peak uint64
	for waited := time.Now(); f.D.RPC().Conns() > 3; {
		if time.Since(waited) > writeTimeout+60*time.Second {
			t.Fatal("the client that does not read was not dropped")
		}
		if err := f.Admin.Ping(ctxT(t)); err != nil {
			t.Fatalf("another client: %v", err)
		}
		peak = max(peak, heapAlloc())
		time.Sleep(50 * time.Millisecond)
	}
	grown := int64(peak) - int64(base)
	// What the limits allow: one call's worth of items being answered
	// (its results as Go values, measured above, and its reply being
	// encoded: the encoder's buffer, which grows by doubling to up to
	// twice the reply, and the reply copied out of it), one reply waiting
	// to be queued, the unsent replies, the requests read (raw and
	// decoded), and 4 MiB for everything else. The bound used to count
	// the reply being made at its encoded size only (2 replies in all):
	// on a loaded box 1 run in 6 peaked at 8.6 MiB of its 8.6 MiB (most
	// runs 4-6 MiB, a few 8.3-8.6). Still far below the 36 MiB of the
	// replies asked for.
	bound := values + int64(4*reply+maxUnsent+4*calls*len(body)+4<<20)
	t.Logf("%d calls of %d items (reply %d KiB each, %.1f MiB as values, %d MiB in all): heap grew by at most %.1f MiB (bound %.1f MiB)",
		calls, items, reply>>10, float64(values)/(1<<20), calls*reply>>20, float64(grown)/(1<<20), float64(bound)/(1<<20))
	if grown > bound {
		t.Errorf("the daemon's heap grew by %.1f MiB; the bound is %.1f MiB", float64(grown)/(1<<20), float64(bound)/(1<<20))
	}
	waitFor(t, "the heap to shrink", func() bool { return heapAlloc() < base+16<<20 })
}

// heapAlloc is the live heap: what is reachable after two collections.
// One collection keeps the sync.Pools' contents (they move to the pools'
// victim caches, dropped at the next): encoding/json's and the rpc
// package's pooled buffers, a reply's size each, are reused caches, not
// memory a connection holds, and whether one is in a pool at a given
// sample depends on scheduling.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitFor polls cond for up to 20 seconds.
var waitFor = testkit.WaitFor

// httpsTransport and metricsText are internal/testkit's.
var (
	httpsTransport = testkit.HTTPSTransport
	metricsText    = testkit.MetricsText
)

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Long tags: a 3 MB auth tag cost 1.7 s of CPU and each
// failed login logged all of it (70 logins wrote 210 MB). A tag over
// facade.MaxTagLength (1 KiB) is refused before parsing; errors and log
// lines quote its first 64 bytes, and no error message reaching a client is
// over facade.MaxErrorMessage (1 KiB).
func TestLongTagsBounded(t *testing.T) {
	logs := &syncBuffer{}
	f := newProvFixtureWith(t, func(c *daemon.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	long := "user-" + strings.Repeat("a", 60<<10) // as long as fits before login
	before := len(logs.String())
	const logins = 70
	for i := 0; i < logins; i++ {
		c := newRawConn(t, f.D, f.Model)
		r := c.mustCall("Admin", 3, "", "Login", params.LoginRequest{AuthTag: long, Credentials: "x"})
		if r.err == nil || len(r.err.Message) > 200 || !strings.Contains(r.err.Message, "(61445 bytes, over the limit of 1024) is not a valid tag") {
			t.Fatalf("login with a 60 KiB tag: %v", r.err)
		}
		c.ws.Close()
	}
	// A valid user tag under the cap is logged by its first 64 bytes.
	c := newRawConn(t, f.D, f.Model)
	if r := c.mustCall("Admin", 3, "", "Login", params.LoginRequest{AuthTag: "user-" + strings.Repeat("b", 1000), Credentials: "x"}); r.err == nil {
		t.Fatal("a login as an unknown 1000-byte user succeeded")
	}
	if got := strings.Count(logs.String()[before:], "login refused"); got != logins+1 {
		t.Fatalf("%d failed logins logged; want %d", got, logins+1)
	}
	if !strings.Contains(logs.String(), "bbbb...(1005 bytes)") {
		t.Errorf("the log does not quote the long tag by its prefix:\n%s", grepLines(logs.String(), "bbbb"))
	}
	if grown := len(logs.String()) - before; grown > logins*1024 {
		t.Errorf("%d failed logins with a 60 KiB tag wrote %d bytes of log", logins, grown)
	}
	// After login, in a bulk call: the item's error is bounded too.
	huge := "machine-" + strings.Repeat("9", 1<<20)
	res := mustCall[params.LifeResults](t, f.Agent, 11, "Life", ents(huge, "machine-0"))
	if e := res.Results[0].Error; e == nil || len(e.Message) > facade.MaxErrorMessage {
		t.Fatalf("Life of a 1 MiB tag: %+v", e)
	}
	if res.Results[1].Error != nil || res.Results[1].Life != "alive" {
		t.Fatalf("the other item: %+v", res.Results[1])
	}
	if err := f.Admin.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// Config sizes (a 69 MB value made a reply over python-libjuju's 4 MiB
// limit). Wherever config is set, a key over 256
// bytes, a value over 256 KiB and a config over 1 MiB in all (after the
// update is merged) are refused with code "not valid", and nothing is
// written; what is kept reads back in a reply well under 4 MiB.
func TestConfigLimits(t *testing.T) {
	d := start(t, nil)
	admin := loginAdmin(t, d, "")
	rev := d.State().Revision()
	set := func(method string, args any) error {
		return admin.Call(ctxT(t), "ModelAdmin", 1, "", method, args, nil)
	}
	value := func(n int) string { return strings.Repeat("v", n-2) } // n bytes of JSON
	cases := []struct {
		name, method string
		args         any
		msg          string
	}{
		// A value is a free-form value: the wire's bound of one
		// (rpc.MaxValueBytes, the same size) refuses it first.
		{"model value", "SetModelConfig", params.SetModelConfigArgs{Model: "default", Config: map[string]any{"big": value(state.MaxConfigValue + 1)}},
			`config["big"]: over 262144 bytes of JSON (limit 262144)`},
		{"controller value", "SetControllerConfig", params.SetControllerConfigArgs{Config: map[string]any{"big": value(state.MaxConfigValue + 1)}},
			`config["big"]: over 262144 bytes of JSON (limit 262144)`},
		{"new model", "AddModel", params.AddModelArgs{Name: "m", Config: map[string]any{"big": value(state.MaxConfigValue + 1)}},
			`config["big"]: over 262144 bytes of JSON (limit 262144)`},
	}
	for _, tc := range cases {
		wantErr(t, set(tc.method, tc.args), tc.msg, params.CodeNotValid)
	}
	// ModelAdmin refuses such a key by its own rules first, and the wire
	// such a value; state holds the limits for every other way in.
	err := d.State().UpdateModelConfig(t.Context(), d.Credentials().DefaultModelUUID, map[string]any{strings.Repeat("k", 257): 1}, nil)
	if err == nil || err.Error() != `config key "`+strings.Repeat("k", 64)+`"...: 257 bytes (limit 256) not valid` {
		t.Fatalf("a 257-byte key: %v", err)
	}
	err = d.State().UpdateModelConfig(t.Context(), d.Credentials().DefaultModelUUID, map[string]any{"big": value(state.MaxConfigValue + 1)}, nil)
	if err == nil || err.Error() != `config value of "big": 262145 bytes (limit 262144) not valid` {
		t.Fatalf("a value over the limit: %v", err)
	}
	if got := d.State().Revision(); got != rev {
		t.Fatalf("revision %d -> %d: a refused config was written", rev, got)
	}
	// Values that fit one by one, until the whole would be over 1 MiB
	// (4 KiB left for the model's own keys: Juju's defaults are 1.8 KB).
	quarter := value(state.MaxConfigValue - 1024)
	for i := 0; i < 4; i++ {
		if err := set("SetModelConfig", params.SetModelConfigArgs{Model: "default", Config: map[string]any{fmt.Sprintf("k%d", i): quarter}}); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	err = set("SetModelConfig", params.SetModelConfigArgs{Model: "default", Config: map[string]any{"k4": quarter}})
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Code != params.CodeNotValid || !strings.Contains(pe.Message, "after the update (limit 1048576)") {
		t.Fatalf("a fifth quarter-MiB value: %v", err)
	}
	var raw json.RawMessage
	if err := admin.Call(ctxT(t), "ModelAdmin", 1, "", "ModelConfig", params.ModelArgs{Model: "default"}, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) > state.MaxConfigTotal+64<<10 {
		t.Errorf("ModelConfig reply of %d bytes", len(raw))
	}
}

// Per entity (one machine agent opened 150 connections x 1,000 watchers,
// +690 MB): a machine agent (or a user who is not a
// superuser) may hold --max-connections-per-entity connections and
// --max-watchers-per-entity watchers across them, besides --max-watchers
// per connection; over them the login or the Watch call gets code "quota
// limit exceeded", and what the entity holds is freed as its connections
// end. The controller agent is not counted.
func TestEntityLimits(t *testing.T) {
	const (
		conns       = 3
		perConn     = 4
		perEntity   = 6
		attackConns = 10
	)
	f := newProvFixtureWith(t, func(c *daemon.Config) {
		c.MaxConnsPerEntity = conns
		c.MaxWatchersPerEntity = perEntity
		c.MaxWatchers = perConn
	})
	// machine 0 already has one connection (f.Agent).
	var agents []*client.Conn
	for i := 0; i < attackConns; i++ {
		c := dial(t, f.D, f.Model)
		_, err := c.LoginAgent(ctxT(t), "machine-0", m0Password, m0Nonce)
		if len(agents) < conns-1 {
			if err != nil {
				t.Fatalf("login %d: %v", i, err)
			}
			agents = append(agents, c)
			continue
		}
		wantErr(t, err, "too many connections for machine-0 (limit 3)", params.CodeQuotaLimitExceeded)
	}
	agents = append(agents, f.Agent)
	watch := func(c *client.Conn) error {
		var r params.NotifyWatchResult
		if err := c.Call(ctxT(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &r); err != nil {
			return err
		}
		if r.Error != nil {
			return r.Error
		}
		return nil
	}
	base := f.D.Hub().Subscriptions()
	for i := 0; i < perConn; i++ {
		if err := watch(agents[0]); err != nil {
			t.Fatalf("watcher %d on one connection: %v", i, err)
		}
	}
	wantErr(t, watch(agents[0]), "too many watchers on this connection (limit 4)", params.CodeQuotaLimitExceeded)
	for i := perConn; i < perEntity; i++ {
		if err := watch(agents[1]); err != nil {
			t.Fatalf("watcher %d on another connection: %v", i, err)
		}
	}
	wantErr(t, watch(agents[2]), "too many watchers for machine-0 across its connections (limit 6)", params.CodeQuotaLimitExceeded)
	if got := f.D.Hub().Subscriptions() - base; got != perEntity {
		t.Errorf("machine 0 holds %d watcher subscriptions; the limit is %d", got, perEntity)
	}
	// A connection that ends frees its watchers and its slot.
	agents[0].Close()
	// (The hub also counts one subscription per logged-in connection: the
	// watch of its credentials.)
	waitFor(t, "the connection to end", func() bool { return f.D.Hub().Subscriptions()-base == perEntity-perConn-1 })
	if err := watch(agents[2]); err != nil {
		t.Fatalf("a watcher after another connection ended: %v", err)
	}
	waitFor(t, "a free connection slot", func() bool {
		c := dial(t, f.D, f.Model)
		_, err := c.LoginAgent(ctxT(t), "machine-0", m0Password, m0Nonce)
		return err == nil
	})
	// The controller agent is not counted.
	for i := 0; i < conns+2; i++ {
		loginController(t, f.D, f.Model)
	}
}

// The watcher attack at a small scale, at the default limits: one machine
// agent opens 20 connections and 200 watchers on each, with a Next parked
// on every watcher. It gets --max-connections-per-entity connections and
// --max-watchers-per-entity watchers in all; the daemon's heap grows by
// what those hold, and a write that wakes them is answered.
func TestEntityWatcherAttackBounded(t *testing.T) {
	f := newProvFixture(t)
	got, grown, wake := watcherAttack(t, f, 20, 200)
	t.Logf("watchers held: %d; heap +%.1f MiB; the write that woke them took %v", got, float64(grown)/(1<<20), wake)
	if got > daemon.DefaultMaxWatchersPerEntity {
		t.Errorf("machine 0 holds %d watchers; the limit is %d", got, daemon.DefaultMaxWatchersPerEntity)
	}
	if bound := int64(daemon.DefaultMaxWatchersPerEntity*8<<10 + daemon.DefaultMaxConnsPerEntity*connlimit.ConnWorstCase); grown > bound {
		t.Errorf("heap grew by %.1f MiB; the bound is %.1f MiB", float64(grown)/(1<<20), float64(bound)/(1<<20))
	}
	if err := f.Admin.Ping(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// watcherAttack logs in as machine 0 on conns connections and makes
// perConn watchers on each, parking a Next on every one; it returns how
// many watchers the daemon granted, its heap growth, and how long a model
// config write that wakes them all took.
func watcherAttack(t *testing.T, f *provFixture, conns, perConn int) (got int, grown int64, wake time.Duration) {
	t.Helper()
	base := heapAlloc()
	for i := 0; i < conns; i++ {
		c := newRawConn(t, f.D, f.Model)
		r := c.mustCall("Admin", 3, "", "Login", params.LoginRequest{AuthTag: "machine-0", Credentials: m0Password, Nonce: m0Nonce})
		if r.err != nil {
			continue // over the connection limit
		}
		for j := 0; j < perConn; j++ {
			r := c.mustCall("Provisioner", 11, "", "WatchForModelConfigChanges", nil)
			var res params.NotifyWatchResult
			if r.err != nil || json.Unmarshal(r.response, &res) != nil || res.NotifyWatcherId == "" {
				break // over a watcher limit
			}
			got++
			if _, err := c.send("NotifyWatcher", 1, res.NotifyWatcherId, "Next", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	grown = int64(heapAlloc()) - int64(base)
	t0 := time.Now()
	if err := f.St.UpdateModelConfig(t.Context(), f.Model, map[string]any{"wake": time.Now().String()}, nil); err != nil {
		t.Fatal(err)
	}
	return got, grown, time.Since(t0)
}

// Failed logins are throttled (unthrottled: 186-206 guesses a second at a
// user's password, 86 at /backup's basic auth): after --login-failures
// failures of a user or an agent from one client, its logins from there
// back off (1 s, doubling, up to --login-backoff-max), refused unchecked
// with code "try again" (HTTP 429 on /backup); never for good; counted in
// /metrics. The daemon's clock is the fixture's fake one.
func TestLoginThrottle(t *testing.T) {
	f := newProvFixtureWith(t, func(c *daemon.Config) { c.LoginFailures = 3 })
	if _, err := f.St.AddUser(t.Context(), "bob", "Bob", "bob-password-0123456789", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	login := func(tag, password string) error {
		c := dial(t, f.D, "")
		defer c.Close()
		var err error
		if strings.HasPrefix(tag, "user-") {
			_, err = c.LoginUser(ctxT(t), strings.TrimPrefix(tag, "user-"), password)
		} else {
			_, err = c.LoginAgent(ctxT(t), tag, password, m0Nonce)
		}
		return err
	}
	// A guesser on loopback, as fast as the daemon lets it, for a minute of
	// the daemon's clock: it gets 3 free guesses, then one per wait.
	guesses := 0
	for end := f.Clock.Now().Add(time.Minute); f.Clock.Now().Before(end); {
		err := login("user-bob", "guess")
		switch {
		case isCode(err, params.CodeUnauthorized):
			guesses++
		case isCode(err, params.CodeTryAgain):
			if !strings.HasPrefix(err.Error(), "too many failed logins; try again in ") {
				t.Fatalf("throttled login: %v", err)
			}
			f.Clock.Advance(time.Second)
		default:
			t.Fatalf("guess: %v", err)
		}
	}
	t.Logf("%d password guesses in a minute of the daemon's clock", guesses)
	if guesses > 3+6+2 { // free, then 1+2+4+8+16+32 s
		t.Errorf("%d guesses in a minute", guesses)
	}
	// The right password waits its turn too, but gets in once it is up.
	err := login("user-bob", "bob-password-0123456789")
	wantErrContaining(t, err, "too many failed logins; try again in", params.CodeTryAgain)
	f.Clock.Advance(daemon.Default("").LoginBackoffMax)
	if err := login("user-bob", "bob-password-0123456789"); err != nil {
		t.Fatalf("after the longest wait: %v", err)
	}
	// An agent's failures throttle that agent, not others on the address.
	for i := 0; i < 4; i++ {
		_ = login("machine-0", "wrong-password-0123456789")
	}
	wantErrContaining(t, login("machine-0", m0Password), "too many failed logins", params.CodeTryAgain)
	loginController(t, f.D, f.Model)

	// /backup's basic auth is throttled the same way (429, Retry-After).
	tr := httpsTransport(f.D)
	defer tr.CloseIdleConnections()
	backup := func(password string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, "https://"+f.D.Addr()+"/backup", nil)
		req.SetBasicAuth("admin", password)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	f.Clock.Advance(time.Hour) // the address's failures above are forgotten
	var last *http.Response
	for i := 0; i < 5; i++ {
		last = backup("wrong")
	}
	if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Retry-After") == "" {
		t.Fatalf("/backup after 5 wrong passwords: %s, Retry-After %q", last.Status, last.Header.Get("Retry-After"))
	}
	f.Clock.Advance(time.Minute)
	if resp := backup(f.D.Credentials().AdminPassword); resp.StatusCode != http.StatusOK {
		t.Fatalf("/backup with the right password after the wait: %s", resp.Status)
	}

	m := metricsText(t, f.D, nil)
	for _, want := range []string{
		`provisiond_login_failures_total{kind="user",path="api"} ` + strconv.Itoa(guesses),
		`provisiond_login_failures_total{kind="agent",path="api"} 4`,
		`provisiond_login_failures_total{kind="user",path="backup"} 4`,
		`provisiond_login_throttled_total{kind="user",path="backup"} 1`,
		`provisiond_login_throttled_total{kind="agent",path="api"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(m, "provisiond_login_"))
		}
	}
}

// /metrics is open on loopback and, from other
// addresses, needs a superuser's basic auth or the bearer token of
// --metrics-token-file; --metrics-auth always asks loopback clients too.
// The daemon listens on every address so a client can come from a
// non-loopback one.
func TestMetricsAuth(t *testing.T) {
	remote := nonLoopbackIP(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{daemon.MetricsAuthLocal, daemon.MetricsAuthAlways, daemon.MetricsAuthNone} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, func(c *daemon.Config) {
				c.Addr = "0.0.0.0:0"
				c.MetricsAuth = mode
				c.MetricsTokenFile = tokenFile
			})
			_, port, _ := net.SplitHostPort(d.Addr())
			get := func(host string, hdr http.Header) int {
				tr := httpsTransport(d)
				defer tr.CloseIdleConnections()
				req, _ := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(host, port)+"/metrics", nil)
				req.Header = hdr
				resp, err := (&http.Client{Transport: tr}).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			basic := func(user, pw string) http.Header {
				r, _ := http.NewRequest("GET", "/", nil)
				r.SetBasicAuth(user, pw)
				return r.Header
			}
			bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
			open, closed := http.StatusOK, http.StatusUnauthorized
			if mode == daemon.MetricsAuthNone {
				closed = http.StatusOK
			}
			loopback := open
			if mode == daemon.MetricsAuthAlways {
				loopback = closed
			}
			for _, c := range []struct {
				what, host string
				hdr        http.Header
				want       int
			}{
				{"loopback, nothing", "127.0.0.1", nil, loopback},
				{"remote, nothing", remote, nil, closed},
				{"remote, wrong password", remote, basic("admin", "wrong"), closed},
				{"remote, wrong token", remote, bearer("wrong"), closed},
				{"remote, admin", remote, basic("admin", d.Credentials().AdminPassword), open},
				{"remote, token", remote, bearer("s3cret-token-0123456789"), open},
			} {
				if got := get(c.host, c.hdr); got != c.want {
					t.Errorf("%s: %d; want %d", c.what, got, c.want)
				}
			}
		})
	}
}

// nonLoopbackIP is an address of this host other than loopback, or the
// test is skipped.
func nonLoopbackIP(t *testing.T) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	t.Skip("this host has no address but loopback to come from")
	return ""
}
