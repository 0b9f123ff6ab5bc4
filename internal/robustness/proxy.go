package robustness

import (
	"net"
	"net/url"
	"sync"
)

// proxy is a loopback TCP proxy between one daemon and one etcd member,
// through which the harness partitions the daemon from etcd without root
// (no network namespace): while blocked, it forwards nothing either way
// and connects no new connection, holding every socket open, as a
// network dropping packets would; healed, it forwards again (what was
// sent meanwhile arrives late, as TCP would resend it).
//
// Its goroutines (the accept loop, two copiers per connection) are
// started by newProxy and ended and waited for by close.
type proxy struct {
	ln     net.Listener
	target string // host:port of the member

	mu      sync.Mutex
	cond    *sync.Cond
	blocked bool
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// newProxy listens on a free port of host (an address) for a member whose
// client URL is memberURL.
func newProxy(host, memberURL string) (*proxy, error) {
	u, err := url.Parse(memberURL)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	return p, nil
}

// url is the endpoint a daemon is given instead of the member's.
func (p *proxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track records a connection, to be closed by close; false once closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) serve(c net.Conn) {
	defer c.Close()
	if !p.pass() {
		return
	}
	t, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the member is down: the daemon sees a refused connection
	}
	if !p.track(t) {
		t.Close()
		return
	}
	defer t.Close()
	done := make(chan struct{}, 2)
	go func() { p.copy(t, c); done <- struct{}{} }() // owned by serve: it waits for both
	go func() { p.copy(c, t); done <- struct{}{} }()
	<-done
	c.Close()
	t.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, t)
	p.mu.Unlock()
}

// copy forwards src to dst, holding each chunk while the proxy is
// blocked.
func (p *proxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed socket: serve closes both sides
		}
	}
}

// pass waits while the proxy is blocked; false once it is closed.
func (p *proxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blocked && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

// block cuts the link (true) or heals it (false).
func (p *proxy) block(b bool) {
	p.mu.Lock()
	p.blocked = b
	p.mu.Unlock()
	p.cond.Broadcast()
}

// reset closes every connection through the proxy (as a member's restart
// would end them); new ones are made as usual.
func (p *proxy) reset() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// close stops the proxy and waits for its goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	p.ln.Close()
	p.wg.Wait()
}
