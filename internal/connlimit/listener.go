package connlimit

import (
	"bufio"
	"bytes"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The connection cap (--max-connections) counts accepted TCP connections:
// API websockets, HTTP keep-alive connections (/health, /metrics, /backup)
// and connections still in their TLS handshake or headers alike, so no
// kind of client can hold more file descriptors than the cap. Over it a
// new connection is closed as soon as it is accepted (with a reset, so the
// server keeps no TIME_WAIT state for it); the client sees the connection
// drop before the TLS handshake, and provisiond_connections_refused_total
// counts it by reason.
//
// Within the cap, connections that have not logged in ("pending": every
// connection from its accept until its websocket logs in, and HTTP
// connections for their life) are bounded so that no client can fill the
// cap without credentials (docs/reliability.md, "Connections and logins
// under attack"):
//
//   - per client, at most perClient pending (--max-pending-per-address).
//     A client is what one host can rotate through: an IPv4 address, an
//     IPv6 /64, and on this host a local user (loopback, or the host's own
//     address), told apart by the user that owns the client's socket
//     (peerLookup), so one local user cannot keep another out;
//   - in all, at most maxPending pending (--max-pending-connections), so
//     clients at many addresses still leave the rest of the cap to
//     connections that have logged in;
//   - the last reserve slots of the cap are kept for the local operator:
//     a process on this host running as the daemon's user or root, the
//     users who can read credentials.yaml and the database anyway. Its
//     connections count only against the cap itself, not against the
//     bounds above, and its TLS handshakes go first (handshake.go).
//
// While the overload gate sheds (overload.go), every new connection is
// refused the same way, before these bounds, but the local operator's
// while it holds fewer than its share of the cap (reserve): an operator's
// provisionctl still gets in, a local process holding thousands of
// connections (a load generator's agents) is shed like anyone.

// Reasons a connection is refused at accept (the refused callback's
// argument: provisiond_connections_refused_total's label).
const (
	RefusedCap     = "cap"     // --max-connections (less the operator's share)
	RefusedPending = "pending" // --max-pending-connections
	RefusedAddress = "address" // --max-pending-per-address
	// RefusedHandshakes: a client's handshakes in progress (handshake.go).
	RefusedHandshakes = "handshakes"
	// RefusedOverload: the process was too busy to take more (overload.go).
	RefusedOverload = "overload"
)

// connLimits are a listener's bounds (see above).
type connLimits struct {
	max        int // open connections
	reserve    int // of max, kept for the local operator
	maxPending int // connections that have not logged in, the operator's aside
	perClient  int // of those, from one client
}

// newConnLimits derives the bounds from the cap: the operator's share is
// an eighth of it, at most 8; unless set, pending connections may hold
// half of it, and one client a sixteenth (at least 8), but never more than
// a quarter of what all may hold, so that at any cap one client leaves
// room to others.
func newConnLimits(maxConns, maxPending, perClient int) connLimits {
	l := connLimits{max: maxConns, reserve: min(8, maxConns/8), maxPending: maxPending, perClient: perClient}
	if l.maxPending <= 0 {
		l.maxPending = maxConns / 2
	}
	l.maxPending = max(1, min(l.maxPending, maxConns-l.reserve))
	if l.perClient <= 0 {
		l.perClient = max(1, min(max(8, maxConns/16), l.maxPending/4))
	}
	l.perClient = min(l.perClient, l.maxPending)
	return l
}

// Listener is a net.Listener that keeps at most lim.max accepted
// connections open, within them the bounds above.
type Listener struct {
	net.Listener
	lim   connLimits
	peers *peerLookup
	// operators are the users whose local connections are the operator's.
	operators map[uint32]bool
	clientOf  func(netip.Addr) string // the client of a remote address
	refused   func(reason string)     // called for each connection closed at accept
	overload  *Overload               // sheds new connections while busy (nil: never)

	// stopped: the listener is closed, and connections closed after it
	// are not counted out (nothing is admitted any more; a stopping
	// daemon closes thousands at once, and each close took mu).
	stopped atomic.Bool

	mu   sync.Mutex // guards the fields below
	open int
	// operatorOpen are the local operator's open connections, which are
	// shed under overload only beyond its share of the cap (reserve).
	operatorOpen int
	pending      int            // pending connections but the operator's
	pendingBy    map[string]int // the same by client
	// conns are the open connections by client address, for the login
	// throttle and the login notice (Client, LoggedIn).
	conns map[netip.AddrPort]*limitConn
}

// NewListener wraps ln in the connection cap maxConns and, within it, at
// most maxPending connections that have not logged in and perClient of
// them from one client (0: derived from the cap, see newConnLimits).
// clientOf names the client of a remote address (an address, an IPv6
// /64: the login throttle's key); refused, if not nil, is called with
// the reason of each connection closed at accept.
func NewListener(ln net.Listener, maxConns, maxPending, perClient int, clientOf func(netip.Addr) string, refused func(reason string)) *Listener {
	l := newListener(ln, newConnLimits(maxConns, maxPending, perClient), refused)
	l.clientOf = clientOf
	return l
}

func newListener(ln net.Listener, lim connLimits, refused func(reason string)) *Listener {
	if refused == nil {
		refused = func(string) {}
	}
	return &Listener{Listener: ln, lim: lim, peers: newPeerLookup(), refused: refused, clientOf: netip.Addr.String,
		operators: map[uint32]bool{0: true, uint32(os.Geteuid()): true},
		pendingBy: map[string]int{}, conns: map[netip.AddrPort]*limitConn{}}
}

// Accept returns the next connection within the bounds; connections over
// them are closed here and never returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: l, accepted: time.Now(), remote: addrPortOf(c.RemoteAddr())}
		lc.client, lc.operator = l.classify(addrPortOf(c.LocalAddr()), lc.remote)
		if reason := l.admit(lc, l.overload.Shedding()); reason != "" {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			l.refused(reason)
			continue
		}
		return lc, nil
	}
}

// Shed makes l refuse new connections while o sheds (overload.go), the
// local operator's only beyond its share of the cap. Call it before the
// first Accept.
func (l *Listener) Shed(o *Overload) { l.overload = o }

// Close closes the listener and its peer lookup's socket. Connections
// closed from then on are not counted out: Open and Pending keep what
// they were (the process is stopping).
func (l *Listener) Close() error {
	l.stopped.Store(true)
	err := l.Listener.Close()
	l.peers.close()
	return err
}

// classify names the client of a connection from remote to local, and
// says whether it is the local operator's.
func (l *Listener) classify(local, remote netip.AddrPort) (client string, operator bool) {
	ip := remote.Addr().Unmap()
	if ip.IsLoopback() || ip == local.Addr().Unmap() {
		if uid, ok := l.peers.uid(local, remote); ok {
			return "local user " + strconv.FormatUint(uint64(uid), 10), l.operators[uid]
		}
	}
	return l.clientOf(ip), false
}

// admit counts lc in, or returns why it is refused; shed says the
// overload gate sheds.
func (l *Listener) admit(lc *limitConn, shed bool) (refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if shed && (!lc.operator || l.operatorOpen >= l.lim.reserve) {
		return RefusedOverload
	}
	if lc.operator {
		if l.open >= l.lim.max {
			return RefusedCap
		}
	} else {
		switch {
		case l.open >= l.lim.max-l.lim.reserve:
			return RefusedCap
		case l.pending >= l.lim.maxPending:
			return RefusedPending
		case l.pendingBy[lc.client] >= l.lim.perClient:
			return RefusedAddress
		}
		l.pending++
		l.pendingBy[lc.client]++
		lc.pending = true
	}
	l.open++
	if lc.operator {
		l.operatorOpen++
	}
	if lc.remote.IsValid() {
		l.conns[lc.remote] = lc
	}
	return ""
}

// unpend stops counting lc as pending; l.mu is held.
func (l *Listener) unpend(lc *limitConn) {
	if !lc.pending {
		return
	}
	lc.pending = false
	l.pending--
	if l.pendingBy[lc.client]--; l.pendingBy[lc.client] <= 0 {
		delete(l.pendingBy, lc.client)
	}
}

// closed counts lc out, unless the listener is closed.
func (l *Listener) closed(lc *limitConn) {
	if l.stopped.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if lc.operator {
		l.operatorOpen--
	}
	l.unpend(lc)
	if l.conns[lc.remote] == lc {
		delete(l.conns, lc.remote)
	}
}

// lookup is the open connection from remote (host:port), or nil (also
// for a nil listener).
func (l *Listener) lookup(remote string) *limitConn {
	ap, err := netip.ParseAddrPort(remote)
	if l == nil || err != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns[netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())]
}

// Client is the client the open connection from remote (host:port) is
// counted under, and whether it is the local operator's; ok is false when
// there is no such connection (also for a nil listener).
func (l *Listener) Client(remote string) (client string, operator, ok bool) {
	lc := l.lookup(remote)
	if lc == nil {
		return "", false, false
	}
	return lc.client, lc.operator, true
}

// LoggedIn stops counting the connection from remote as pending: it has
// logged in.
func (l *Listener) LoggedIn(remote string) {
	lc := l.lookup(remote)
	if lc == nil {
		return
	}
	l.mu.Lock()
	l.unpend(lc)
	l.mu.Unlock()
}

// Open returns the number of accepted connections not yet closed.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Pending returns the number of open connections that have not logged in,
// the local operator's aside.
func (l *Listener) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending
}

func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

type limitConn struct {
	net.Conn
	l        *Listener
	once     sync.Once
	accepted time.Time // when Accept returned it (the handshake gate's wait starts)
	remote   netip.AddrPort
	client   string // what the per-client bounds count it under
	operator bool   // the local operator's
	pending  bool   // counted as pending; guarded by l.mu

	// slot is the gate whose slot the handshake holds (nil: none), wrote
	// whether the server's flight has been written since (handshake.go);
	// inGate is the gate that counts the handshake as in progress.
	slot   atomic.Pointer[HandshakeGate]
	inGate atomic.Pointer[HandshakeGate]
	wrote  atomic.Bool
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.closed(c) })
	c.releaseSlot()
	return err
}

// Sizing the default connection cap to the box.
const (
	// reservedFiles are the file descriptors kept for everything but
	// client connections: the database, the log, the listener, a backup's
	// temporary file, the runtime's epoll and pipes.
	reservedFiles = 128
	// ConnWorstCase is what one client can make the daemon hold before it
	// logs in, in bytes: a message up to the pre-login read limit (64 KiB), HTTP
	// headers up to --max-header-bytes (16 KiB, plus net/http's 4 KiB of
	// slack), TLS record buffers and the connection's goroutine. Measured:
	// internal/daemon's TestPreLoginMemoryBound.
	ConnWorstCase = 160 << 10
	// connMemoryShare is the part of the box's memory the connection cap
	// lets clients that have not logged in fill: a quarter.
	connMemoryShare = 4
	// minDefaultConns is the least the default cap is, however small the
	// box.
	minDefaultConns = 64
)

// DefaultMaxConns is the default connection cap: the open file limit less
// reservedFiles, and no more than a quarter of the box's memory (the
// cgroup's limit where one is set) filled by connections that each hold
// the most a client can make them hold before login; at least 64. With the
// usual 1,024-file limit that is 896; on a box with 1 GiB and a high file
// limit, 1,638.
func DefaultMaxConns() int {
	return defaultMaxConns(fileLimit(), MemoryLimit())
}

func defaultMaxConns(files, memory int64) int {
	n := int64(1 << 20)
	if files > 0 {
		n = min(n, files-reservedFiles)
	}
	if memory > 0 {
		n = min(n, memory/connMemoryShare/ConnWorstCase)
	}
	return int(max(n, minDefaultConns))
}

// fileLimit is the process's soft limit on open files (Go raises it to the
// hard limit at start-up on Linux), or 0 if unknown.
func fileLimit() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur > 1<<40 {
		return 1 << 40
	}
	return int64(rl.Cur)
}

// MemoryLimit is the memory a process here may use: the smaller of the
// box's MemTotal and its cgroup's limit (v2 memory.max or v1
// memory.limit_in_bytes), or 0 if neither is known.
func MemoryLimit() int64 {
	var limit int64
	take := func(n int64) {
		if n > 0 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	take(meminfoTotal("/proc/meminfo"))
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
				take(n) // "max" (no limit) does not parse
			}
		}
	}
	return limit
}

func meminfoTotal(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			if kib, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return kib << 10
			}
		}
	}
	return 0
}
