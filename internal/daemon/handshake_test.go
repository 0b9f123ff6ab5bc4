package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/asuser"
	"github.com/provisiond/provisiond/internal/connlimit"
	"github.com/provisiond/provisiond/rpc/client"
)

// startGated starts a daemon on loopback whose API listener's handshake
// gate has slots slots and lets a handshake wait wait.
func startGated(t *testing.T, slots int, wait time.Duration) *Daemon {
	t.Helper()
	cfg := Default(t.TempDir())
	cfg.Addr = "127.0.0.1:0"
	cfg.HandshakeSlots, cfg.HandshakeWait = slots, wait
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return d
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds, failing the test after a bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// traceGate records the gate's events as "wait"/"grant" of the remote
// address (the client's local address).
type traceGate struct {
	mu     sync.Mutex
	events []string
}

func (tr *traceGate) install(g *connlimit.HandshakeGate) {
	g.SetTrace(func(ev string, c net.Conn) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.events = append(tr.events, ev+" "+c.RemoteAddr().String())
	})
}

func (tr *traceGate) of(ev string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, e := range tr.events {
		if len(e) > len(ev) && e[:len(ev)+1] == ev+" " {
			out = append(out, e[len(ev)+1:])
		}
	}
	return out
}

// healthClient is an HTTP client of d's API port that dials a new
// connection for each request and, if local is not nil, sends each
// connection's local address on it (the send blocks: a caller that gives a
// channel reads it once per request).
func healthClient(d *Daemon, local chan<- string) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	// Bounded: a probe that the daemon never answers fails its test
	// within a minute instead of holding the package to its timeout.
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName},
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil && local != nil {
				local <- c.LocalAddr().String()
			}
			return c, err
		},
	}}
}

// With the one slot held, agents' handshakes from one address (127.0.0.2)
// wait; a /health probe from another (127.0.0.1) that comes after them is
// served first, then the agent that came while none of its address
// waited, then the others newest first; every one of them logs in: the
// gate orders the waiters and loses none.
func TestHandshakeGateServesNewestFirst(t *testing.T) {
	d := startGated(t, 1, time.Minute)
	var tr traceGate
	tr.install(d.gate)
	creds := d.Credentials()
	release := d.gate.Hold()

	const agents = 5
	errs := make(chan error, agents)
	for i := range agents {
		go func() {
			c, err := client.Dial(testCtx(t), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert),
				LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}})
			if err == nil {
				_, err = c.LoginUser(testCtx(t), "admin", creds.AdminPassword)
				c.Close()
			}
			errs <- err
		}()
		waitFor(t, "the agent's handshake to wait", func() bool { return d.gate.Waiting() == i+1 })
	}
	local := make(chan string, 1)
	health := make(chan error, 1)
	go func() {
		resp, err := healthClient(d, local).Get("https://" + d.Addr() + "/health")
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = &httpStatusError{resp.StatusCode}
			}
		}
		health <- err
	}()
	probe := <-local
	waitFor(t, "the probe's handshake to wait", func() bool { return d.gate.Waiting() == agents+1 })
	release()

	if err := <-health; err != nil {
		t.Fatalf("/health: %v", err)
	}
	for range agents {
		if err := <-errs; err != nil {
			t.Fatalf("agent: %v", err)
		}
	}
	waited, granted := tr.of("wait"), tr.of("grant")
	if len(waited) != agents+1 || waited[agents] != probe {
		t.Fatalf("waited %q; want %d agents then the probe %s", waited, agents, probe)
	}
	crowded := slices.Clone(waited[1:agents])
	slices.Reverse(crowded)
	want := append([]string{probe, waited[0]}, crowded...)
	if !slices.Equal(granted, want) {
		t.Fatalf("granted %q; want the lone newest first, then the crowded: %q", granted, want)
	}
	if now, peak := d.gate.Held(); now != 0 || peak != 1 {
		t.Fatalf("slots held %d (peak %d) after every handshake; want 0 (peak 1)", now, peak)
	}
}

type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return http.StatusText(e.code) }

// Many clients at once through two slots: every one logs in, at most two
// handshakes held a slot at once, and none is left held.
func TestHandshakeGateBoundsHandshakes(t *testing.T) {
	d := startGated(t, 2, time.Minute)
	creds := d.Credentials()
	const clients = 40
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(testCtx(t), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert)})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if _, err := c.LoginUser(testCtx(t), "admin", creds.AdminPassword); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if now, peak := d.gate.Held(); now != 0 || peak > 2 {
		t.Fatalf("slots held %d, at most %d at once; want 0, at most 2", now, peak)
	}
}

// A handshake that waits longer than HandshakeWait is refused unstarted
// and counted, keeps no slot, and the next client is served.
func TestHandshakeGateDropsStaleWaiters(t *testing.T) {
	d := startGated(t, 1, 300*time.Millisecond)
	creds := d.Credentials()
	release := d.gate.Hold()
	_, err := client.Dial(testCtx(t), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert)})
	if err == nil {
		t.Fatal("a handshake that waited past HandshakeWait was served")
	}
	if n := droppedHandshakes(t, d); n != 1 {
		t.Fatalf("dropped %v handshakes; want 1", n)
	}
	release()
	if now, _ := d.gate.Held(); now != 0 {
		t.Fatalf("%d slots held after the dropped handshake", now)
	}
	dialAndClose(t, d)
}

// A handshake whose client sent its hello and closed the connection
// while it waited is refused when its turn comes, without a key exchange
// (counted as dropped: HandshakeWait is an hour here), and keeps no slot.
func TestHandshakeGateDropsGoneClients(t *testing.T) {
	d := startGated(t, 1, time.Hour)
	release := d.gate.Hold()
	raw, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tls.Client(raw, &tls.Config{ServerName: client.DefaultServerName, InsecureSkipVerify: true}).Handshake()
	}()
	waitFor(t, "the handshake to wait", func() bool { return d.gate.Waiting() == 1 })
	raw.Close()
	<-done
	release()
	waitFor(t, "the gone client's handshake to be dropped", func() bool { return droppedHandshakes(t, d) == 1 })
	waitFor(t, "its slot to be given back", func() bool { now, _ := d.gate.Held(); return now == 0 })
	dialAndClose(t, d)
}

// A client that closes in the middle of its handshake, after its
// ClientHello, gives its slot back.
func TestHandshakeGateSlotFreedOnFailedHandshake(t *testing.T) {
	d := startGated(t, 1, time.Minute)
	for range 3 {
		raw, err := net.Dial("tcp", d.Addr())
		if err != nil {
			t.Fatal(err)
		}
		// No CA: the client rejects the server's certificate and closes
		// after the server's flight.
		err = tls.Client(raw, &tls.Config{ServerName: client.DefaultServerName}).Handshake()
		raw.Close()
		if err == nil {
			t.Fatal("handshake without the CA succeeded")
		}
	}
	waitFor(t, "the slot to be given back", func() bool { now, _ := d.gate.Held(); return now == 0 })
	dialAndClose(t, d)
}

// Shutdown refuses the handshakes waiting for a slot at once.
func TestHandshakeGateShutdownRefusesWaiters(t *testing.T) {
	d := startGated(t, 1, time.Hour)
	creds := d.Credentials()
	d.gate.Hold() // never given back
	errs := make(chan error, 1)
	go func() {
		_, err := client.Dial(testCtx(t), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert)})
		errs <- err
	}()
	waitFor(t, "the handshake to wait", func() bool { return d.gate.Waiting() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err == nil {
		t.Fatal("a handshake waiting at shutdown was served")
	}
	if n := d.gate.Waiting(); n != 0 {
		t.Fatalf("%d handshakes still waiting after Shutdown", n)
	}
}

func droppedHandshakes(t *testing.T, d *Daemon) float64 {
	t.Helper()
	mfs, err := d.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "provisiond_tls_handshakes_dropped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no provisiond_tls_handshakes_dropped_total")
	return 0
}

// stallConn writes its first write (the ClientHello) and blocks every
// later one until unblock is closed: a client that stops after the
// server's flight.
type stallConn struct {
	net.Conn
	writes  int
	unblock chan struct{}
}

func (c *stallConn) Write(b []byte) (int, error) {
	if c.writes++; c.writes > 1 {
		<-c.unblock
	}
	return c.Conn.Write(b)
}

// A client that sends its ClientHello, reads the server's flight and
// never answers holds no slot while the server waits for its Finished.
func TestHandshakeGateStalledClientHoldsNoSlot(t *testing.T) {
	d := startGated(t, 1, time.Minute)
	raw, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	sc := &stallConn{Conn: raw, unblock: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tls.Client(sc, &tls.Config{ServerName: client.DefaultServerName, InsecureSkipVerify: true}).Handshake()
	}()
	waitFor(t, "the server's flight to be written and the slot given back", func() bool {
		now, peak := d.gate.Held()
		return peak == 1 && now == 0
	})
	dialAndClose(t, d)
	close(sc.unblock)
	raw.Close()
	<-done
}

// dialAndClose connects to d's API with its CA (a handshake that must be
// admitted) and closes the connection.
func dialAndClose(t *testing.T, d *Daemon) {
	t.Helper()
	c, err := client.Dial(testCtx(t), client.Config{Addr: d.Addr(), CACert: []byte(d.Credentials().CACert)})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// One client has at most a few TLS handshakes in progress: with the one
// slot held, a local user's handshakes wait up to the bound and the next
// is refused at its ClientHello, counted for "handshakes"; the local
// operator's handshake, not counted, is served first when the slot is
// given back. Needs root (internal/asuser) for a local client of
// another user.
func TestHandshakeGateBoundsAClientsHandshakes(t *testing.T) {
	if !asuser.Supported() {
		t.Skip("a local client of another user needs root (internal/asuser)")
	}
	d := startGated(t, 1, time.Minute)
	var tr traceGate
	tr.install(d.gate)
	release := d.gate.Hold()
	handshake := func(uid uint32) (local string, done <-chan error) {
		var raw net.Conn
		if err := asuser.Do(uid, func() error {
			var err error
			raw, err = net.Dial("tcp", d.Addr())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		errs := make(chan error, 1)
		go func() {
			errs <- tls.Client(raw, &tls.Config{ServerName: client.DefaultServerName, InsecureSkipVerify: true}).Handshake()
		}()
		return raw.LocalAddr().String(), errs
	}
	perClient := d.gate.PerClient()
	var waiting []<-chan error
	for i := range perClient {
		_, done := handshake(65534)
		waiting = append(waiting, done)
		waitFor(t, "the handshake to wait", func() bool { return d.gate.Waiting() == i+1 })
	}
	_, refused := handshake(65534)
	if err := <-refused; err == nil {
		t.Fatal("a handshake over the client's bound was served")
	}
	if m := metricsOf(t, d, "provisiond_connections_refused_total", "handshakes"); m != 1 {
		t.Fatalf("%v refusals for handshakes counted; want 1", m)
	}
	operator, done := handshake(0)
	waitFor(t, "the operator's handshake to wait", func() bool { return d.gate.Waiting() == perClient+1 })
	release()
	if err := <-done; err != nil {
		t.Fatalf("the operator's handshake: %v", err)
	}
	for _, w := range waiting {
		if err := <-w; err != nil {
			t.Fatalf("a waiting handshake: %v", err)
		}
	}
	if granted := tr.of("grant"); len(granted) == 0 || granted[0] != operator {
		t.Fatalf("granted %q; want the operator's %s first", granted, operator)
	}
}

// metricsOf is the value of the counter name whose labels include value.
func metricsOf(t *testing.T, d *Daemon, name, value string) float64 {
	t.Helper()
	mfs, err := d.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{...%q...}", name, value)
	return 0
}
