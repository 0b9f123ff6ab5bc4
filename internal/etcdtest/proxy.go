package etcdtest

import (
	"net"
	"net/url"
	"sync"
)

// Proxy is a loopback TCP proxy between an etcd client and one etcd
// member, through which a test partitions the client from etcd without
// root (no network namespace): while blocked, it forwards nothing either
// way and connects no new connection, holding every socket open, as a
// network dropping packets would; healed, it forwards again (what was
// sent meanwhile arrives late, as TCP would resend it). BlockAfter blocks
// it once the member has sent a given number of bytes through it.
//
// Its goroutines (the accept loop, two copiers per connection) are
// started by NewProxy and ended and waited for by Close.
type Proxy struct {
	ln     net.Listener
	target string // host:port of the member

	mu      sync.Mutex
	cond    *sync.Cond
	blocked bool
	closed  bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup

	// BlockAfter's: the member's bytes still to pass before the proxy
	// blocks (below 0: no such bound), and the channel closed then.
	untilBlock int64
	blockedc   chan struct{}
}

// NewProxy listens on a free port of host (an address) for a member whose
// client URL is memberURL.
func NewProxy(host, memberURL string) (*Proxy, error) {
	u, err := url.Parse(memberURL)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: u.Host, conns: map[net.Conn]struct{}{}, untilBlock: -1}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	return p, nil
}

// URL is the endpoint a client is given instead of the member's.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *Proxy) accept() {
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
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) serve(c net.Conn) {
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
	go func() { p.copy(t, c, false); done <- struct{}{} }() // owned by serve: it waits for both
	go func() { p.copy(c, t, true); done <- struct{}{} }()
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
// blocked; fromMember counts the chunks against BlockAfter's bound.
func (p *Proxy) copy(dst, src net.Conn, fromMember bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if fromMember {
				p.count(n)
			}
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

// count takes n bytes from the member off BlockAfter's bound, blocking
// the proxy once they exceed it.
func (p *Proxy) count(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.untilBlock < 0 {
		return
	}
	if p.untilBlock -= int64(n); p.untilBlock < 0 {
		p.blocked = true
		close(p.blockedc)
	}
}

// BlockAfter blocks the proxy once more than n more bytes have come from
// the member (the chunk that crosses n is held too); the channel returned
// is closed then. Block(false) heals it.
func (p *Proxy) BlockAfter(n int64) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.untilBlock, p.blockedc = n, make(chan struct{})
	return p.blockedc
}

// pass waits while the proxy is blocked; false once it is closed.
func (p *Proxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.blocked && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

// Block cuts the link (true) or heals it (false).
func (p *Proxy) Block(b bool) {
	p.mu.Lock()
	p.blocked = b
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Reset closes every connection through the proxy (as a member's restart
// would end them); new ones are made as usual.
func (p *Proxy) Reset() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
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
