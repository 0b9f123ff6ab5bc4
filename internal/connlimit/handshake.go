package connlimit

import (
	"container/list"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// The handshake gate (docs/performance.md, "storm").
//
// Without it every accepted connection did its TLS handshake at once, in
// its own net/http goroutine: when thousands of agents reconnect after a
// restart, thousands of key exchanges share the CPU, each takes seconds,
// many pass the 10 s bound on the handshake and headers and are cut with
// their work thrown away, and a /health request waits as long as any of
// them. The gate lets at most slots handshakes do their work at once:
//
//   - A handshake takes a slot once its ClientHello has arrived
//     (tls.Config.GetConfigForClient, before the key exchange), and gives
//     it back at its connection's first read after the server's flight
//     was written (the wait for the client's Finished, or for its
//     ClientHello after a HelloRetryRequest), or when its connection
//     closes or is served, whichever comes first. So a slot is held for
//     the server's own CPU work (key exchange, signature), never while a
//     client is slow to send: no client can hold one. (Not
//     VerifyConnection: a per-connection tls.Config for its closure would
//     stay with the connection for its life, 464 bytes.)
//   - The others wait, each in its own net/http goroutine (parked; the
//     connection is already counted by --max-connections, which bounds
//     how many can wait), and are served newest first. Under overload the
//     oldest waiters are those whose clients are the most likely to have
//     given up already, and a fresh retry or a /health probe would
//     otherwise queue behind all of them; under no overload the order
//     does not matter.
//   - Waiters that arrived while another handshake from the same client
//     address was waiting ("crowded") go after those that did not
//     ("lone"), each class newest first. Newest first alone does not
//     bound a waiter's wait under sustained overload: arrivals after it
//     go first. One address's flood of retries (a host's or a NAT's
//     agents all reconnecting) then cannot bury a handshake from another
//     address, such as a monitor's /health probe or an operator's client;
//     agents on addresses of their own are all lone and simply served
//     newest first. (A source address is the peer's claim, but a TCP
//     handshake has confirmed it.)
//   - A handshake that has waited maxWait since its connection was
//     accepted is refused (the connection reset, no TLS work done), and
//     its client retries with its backoff;
//     provisiond_tls_handshakes_dropped_total counts them. One admitted
//     after a wait gets the daemon's bound on the handshake and headers
//     (10 s) again from then: the wait is the daemon's, not the client's.
//     A refused waiter comes back as a new arrival, ahead of everyone
//     under newest first; a longer wait keeps it queued instead, which
//     costs a parked goroutine and no TLS work, so maxWait is long (15 s,
//     half our client's 30 s dial timeout); a client that gives up
//     sooner is found gone by the peek below.
//   - A waiter granted a slot first checks that its client is still
//     there (a peek at the socket: a client that gave up has closed it),
//     so no key exchange is spent on it.
//   - One client (listener.go: an address, an IPv6 /64, a local user)
//     has at most perClient handshakes in progress (waiting for a slot
//     or holding one); one more is refused at its ClientHello, before any
//     TLS work, and counted as refused for "handshakes". So a client that
//     reconnects in a loop costs the gate a few waiters, not the daemon
//     its CPU. The local operator's handshakes are not counted and go
//     before every other waiter (lone, then crowded, among themselves).
//
// Shutdown closes the gate (http.Server.RegisterOnShutdown): the waiters
// are refused at once and their connections closed by net/http.
const (
	// handshakesPerCore is the gate's slots per GOMAXPROCS: two, so a
	// core whose handshake is writing its flight has another to run.
	handshakesPerCore = 2
	// DefaultHandshakeWait is how long a handshake may wait for a slot,
	// from its connection's accept.
	DefaultHandshakeWait = 15 * time.Second
	// handshakesPerClient is a client's handshakes in progress per slot
	// (at least 4 in all).
	handshakesPerClient = 2
)

var (
	errHandshakeWait   = errors.New("tls handshake waited too long for a slot")
	errHandshakeClosed = errors.New("server shutting down")
	errClientGone      = errors.New("client closed the connection while its handshake waited")
	errClientBusy      = errors.New("too many tls handshakes in progress from this client")
)

// HandshakeGate bounds the TLS handshakes doing their work at once. Safe
// for concurrent use.
type HandshakeGate struct {
	slots   int
	maxWait time.Duration
	// bound is the time a handshake admitted after a wait is given from
	// then, for its reads and writes (net/http's deadline ran from the
	// accept).
	bound   time.Duration
	closing chan struct{}
	// dropped is called for each handshake refused after waiting too
	// long, or found with its client gone; refused for each refused for
	// its client's handshakes in progress.
	dropped, refused func()
	perClient        int // handshakes in progress per client (but the operator)

	mu   sync.Mutex // guards the fields below
	busy int        // slots held
	// queues are the waiters (*hsWaiter), each newest first, in the
	// order they are served: the local operator's lone and crowded ones,
	// then the others' lone and crowded ones. Lone ones arrived while no
	// other handshake from their address waited.
	queues     [4]list.List
	perAddr    map[netip.Addr]int // waiters by client address
	inProgress map[string]int     // handshakes in progress by client (not the operator's)
	closed     bool
	peak       int // the most slots held at once (tests)
	// trace, when set (tests: SetTrace), is called with g.mu held as c
	// starts to wait ("wait") and as a waiter c is given a slot ("grant").
	trace func(event string, c net.Conn)
}

type hsWaiter struct {
	c     *limitConn
	addr  netip.Addr
	grant chan struct{} // receives the slot
	in    *list.List    // its queue; nil once granted or removed
	elem  *list.Element
}

// NewHandshakeGate makes a gate of slots slots (0: handshakesPerCore per
// GOMAXPROCS) whose handshakes wait at most maxWait from their accept (0:
// DefaultHandshakeWait); one admitted after a wait gets bound for its
// reads and writes from then (0: no new deadline). dropped is called for
// each handshake refused after waiting too long or found with its client
// gone, refused for each refused for its client's handshakes in progress
// (RefusedHandshakes); either may be nil.
func NewHandshakeGate(slots int, maxWait, bound time.Duration, dropped, refused func()) *HandshakeGate {
	if slots <= 0 {
		slots = handshakesPerCore * runtime.GOMAXPROCS(0)
	}
	if maxWait <= 0 {
		maxWait = DefaultHandshakeWait
	}
	if dropped == nil {
		dropped = func() {}
	}
	if refused == nil {
		refused = func() {}
	}
	return &HandshakeGate{slots: slots, maxWait: maxWait, bound: bound, closing: make(chan struct{}), dropped: dropped,
		refused: refused, perClient: max(4, handshakesPerClient*slots), perAddr: map[netip.Addr]int{}, inProgress: map[string]int{}}
}

// acquire takes a slot for the handshake of c, waiting newest first
// until c has waited maxWait since it was accepted, done is closed or the
// gate closes. On a nil error the caller holds the slot.
func (g *HandshakeGate) acquire(c *limitConn, done <-chan struct{}) error {
	err := g.wait(c, done)
	if err != nil {
		g.end(c)
	}
	return err
}

// begin counts c's handshake in progress, or reports that its client has
// too many; g.mu is held.
func (g *HandshakeGate) begin(c *limitConn) bool {
	if c.operator {
		return true
	}
	if g.inProgress[c.client] >= g.perClient {
		return false
	}
	g.inProgress[c.client]++
	c.inGate.Store(g)
	return true
}

// end stops counting c's handshake in progress, if it was; idempotent.
func (g *HandshakeGate) end(c *limitConn) {
	if !c.inGate.CompareAndSwap(g, nil) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inProgress[c.client]--; g.inProgress[c.client] <= 0 {
		delete(g.inProgress, c.client)
	}
}

// wait does acquire's work; acquire ends the count of a handshake it
// refuses.
func (g *HandshakeGate) wait(c *limitConn, done <-chan struct{}) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return errHandshakeClosed
	}
	if !g.begin(c) {
		g.mu.Unlock()
		g.refused()
		return errClientBusy
	}
	if g.busy < g.slots {
		g.take()
		g.mu.Unlock()
		return nil
	}
	left := g.maxWait - time.Since(c.accepted)
	if left <= 0 {
		g.mu.Unlock()
		g.dropped()
		return errHandshakeWait
	}
	w := &hsWaiter{c: c, addr: c.remoteAddr(), grant: make(chan struct{}, 1)}
	q := 0 // lone
	if g.perAddr[w.addr] > 0 {
		q = 1 // crowded
	}
	if !c.operator {
		q += 2
	}
	w.in = &g.queues[q]
	g.perAddr[w.addr]++
	w.elem = w.in.PushFront(w)
	if g.trace != nil {
		g.trace("wait", c)
	}
	g.mu.Unlock()

	t := time.NewTimer(left)
	defer t.Stop()
	var err error
	select {
	case <-w.grant:
		if c.peerClosed() {
			g.release()
			g.dropped()
			return errClientGone
		}
		if g.bound > 0 {
			_ = c.Conn.SetDeadline(time.Now().Add(g.bound))
		}
		return nil
	case <-t.C:
		err = errHandshakeWait
	case <-done:
		err = errHandshakeClosed
	case <-g.closing:
		err = errHandshakeClosed
	}
	g.mu.Lock()
	if w.in == nil { // granted as the wait ended: pass it on
		g.mu.Unlock()
		<-w.grant
		g.release()
	} else {
		g.remove(w)
		g.mu.Unlock()
	}
	if err == errHandshakeWait {
		g.dropped()
	}
	return err
}

// take counts a slot taken; g.mu is held.
func (g *HandshakeGate) take() {
	g.busy++
	g.peak = max(g.peak, g.busy)
}

// remove takes w off its list; g.mu is held.
func (g *HandshakeGate) remove(w *hsWaiter) {
	if g.perAddr[w.addr]--; g.perAddr[w.addr] <= 0 {
		delete(g.perAddr, w.addr)
	}
	w.in.Remove(w.elem)
	w.in, w.elem = nil, nil
}

// release gives a slot back: to the newest waiter of the first queue
// that has one, if any.
func (g *HandshakeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var e *list.Element
	for i := 0; e == nil && i < len(g.queues); i++ {
		e = g.queues[i].Front()
	}
	if e == nil {
		g.busy--
		return
	}
	w := e.Value.(*hsWaiter)
	g.remove(w)
	if g.trace != nil {
		g.trace("grant", w.c)
	}
	w.grant <- struct{}{}
}

// Close refuses every waiting and later handshake.
func (g *HandshakeGate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		close(g.closing)
	}
}

// Waiting is the number of handshakes waiting for a slot.
func (g *HandshakeGate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for i := range g.queues {
		n += g.queues[i].Len()
	}
	return n
}

// Held is the number of slots held, and the most held at once so far.
func (g *HandshakeGate) Held() (now, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy, g.peak
}

// TLSConfig returns the listener's TLS config: base, whose handshakes
// on a Listener's connections take a slot of g first.
func (g *HandshakeGate) TLSConfig(base *tls.Config) *tls.Config {
	cfg := base.Clone()
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		c, ok := hello.Conn.(*limitConn)
		if !ok {
			return nil, nil // not the API listener's: no gate
		}
		if err := g.acquire(c, hello.Context().Done()); err != nil {
			c.reset()
			return nil, err
		}
		c.slot.Store(g)
		return nil, nil // the listener's config
	}
	return cfg
}

// ReleaseSlot gives back the slot c's handshake holds, if it still does
// (http.Server.ConnState once c is served); c is a Listener's connection
// or a TLS connection over one, anything else is ignored.
func ReleaseSlot(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitConn); ok {
		lc.releaseSlot()
	}
}

// Hold takes one of g's slots as a handshake would; the returned func
// gives it back (tests).
func (g *HandshakeGate) Hold() (release func()) {
	g.mu.Lock()
	g.take()
	g.mu.Unlock()
	return g.release
}

// PerClient is the most handshakes one client may have in progress
// (tests).
func (g *HandshakeGate) PerClient() int { return g.perClient }

// SetTrace installs trace (tests): it is called with the gate's lock held
// as a connection starts to wait ("wait") and as a waiting one is given a
// slot ("grant").
func (g *HandshakeGate) SetTrace(trace func(event string, c net.Conn)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.trace = trace
}

// Read gives back the handshake's slot at the first read after the
// server's flight was written.
func (c *limitConn) Read(b []byte) (int, error) {
	if c.slot.Load() != nil && c.wrote.Load() {
		c.releaseSlot()
	}
	return c.Conn.Read(b)
}

// Write notes that the server's flight is being written while the
// handshake holds a slot.
func (c *limitConn) Write(b []byte) (int, error) {
	if c.slot.Load() != nil {
		c.wrote.Store(true)
	}
	return c.Conn.Write(b)
}

// releaseSlot gives back c's slot if it holds one, and ends its
// handshake's count; idempotent.
func (c *limitConn) releaseSlot() {
	if g := c.slot.Swap(nil); g != nil {
		g.release()
	}
	if g := c.inGate.Load(); g != nil {
		g.end(c)
	}
}

// remoteAddr is c's client address (the zero Addr if unknown).
func (c *limitConn) remoteAddr() netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// reset makes c's close a reset: nothing is kept for a connection whose
// handshake was refused.
func (c *limitConn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// peerClosed reports whether c's client has closed its side (a peek at
// the socket reads end of file); false when unknown or data waits.
func (c *limitConn) peerClosed() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = (n == 0 && err == nil) || err == syscall.ECONNRESET
		return true // never wait
	})
	return closed
}
