package connlimit

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"
)

// peerLookup finds the user that owns the other end of a TCP connection
// whose two ends are on this host, through the kernel's socket diagnostics
// (NETLINK_SOCK_DIAG, what ss(8) asks): one exact lookup by the
// connection's four addresses, a few microseconds, no privilege needed.
// Safe for concurrent use.
type peerLookup struct {
	mu     sync.Mutex // guards the fields below
	fd     int        // the netlink socket, opened at first use; -1: none
	failed bool       // the socket could not be opened: lookups find nothing
	seq    uint32
	buf    []byte
}

func newPeerLookup() *peerLookup { return &peerLookup{fd: -1} }

// Sizes of the kernel's structures (linux/inet_diag.h).
const (
	nlmsgHeaderLen   = 16
	inetDiagReqLen   = 56 // struct inet_diag_req_v2
	inetDiagSockID   = 8  // offset of its struct inet_diag_sockid
	inetDiagUIDAt    = 64 // offset of idiag_uid in struct inet_diag_msg
	inetDiagMsgLen   = 72
	inetDiagNoCookie = 0xffffffff
)

// uid returns the owner of the socket at remote connected to local, both
// addresses of this host; ok is false when it cannot be found (the client
// has gone, or the kernel does not answer).
func (p *peerLookup) uid(local, remote netip.AddrPort) (uid uint32, ok bool) {
	if p == nil {
		return 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.open() {
		return 0, false
	}
	// An IPv4 client's socket is AF_INET; one that dialled a mapped IPv6
	// address is AF_INET6 with mapped addresses.
	l, r := local.Addr().Unmap(), remote.Addr().Unmap()
	if l.Is4() && r.Is4() {
		if uid, ok := p.ask(unix.AF_INET, r.AsSlice(), remote.Port(), l.AsSlice(), local.Port()); ok {
			return uid, true
		}
		l, r = netip.AddrFrom16(l.As16()), netip.AddrFrom16(r.As16())
	}
	b16 := func(a netip.Addr) []byte { s := a.As16(); return s[:] }
	return p.ask(unix.AF_INET6, b16(r), remote.Port(), b16(l), local.Port())
}

func (p *peerLookup) open() bool {
	if p.fd >= 0 {
		return true
	}
	if p.failed {
		return false
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		p.failed = true
		return false
	}
	p.fd, p.buf = fd, make([]byte, 1024)
	return true
}

// ask sends one exact lookup of the client's socket, whose own end is
// client:cport and whose peer is server:sport, and reads its answer; p.mu
// is held.
func (p *peerLookup) ask(family uint8, client []byte, cport uint16, server []byte, sport uint16) (uint32, bool) {
	p.seq++
	var req [nlmsgHeaderLen + inetDiagReqLen]byte
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], p.seq)
	r := req[nlmsgHeaderLen:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 0xffffffff) // every state
	id := r[inetDiagSockID:]
	binary.BigEndian.PutUint16(id[0:], cport) // the socket's own end...
	binary.BigEndian.PutUint16(id[2:], sport) // ... and its peer
	copy(id[4:20], client)
	copy(id[20:36], server)
	ne.PutUint32(id[40:], inetDiagNoCookie)
	ne.PutUint32(id[44:], inetDiagNoCookie)
	if err := unix.Sendto(p.fd, req[:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		p.reset()
		return 0, false
	}
	// The kernel answers while handling the send; never wait for more.
	for {
		n, _, err := unix.Recvfrom(p.fd, p.buf, unix.MSG_DONTWAIT)
		if err != nil || n < nlmsgHeaderLen {
			if err != unix.EAGAIN && err != unix.EINTR {
				p.reset()
			}
			return 0, false
		}
		msg := p.buf[:n]
		if ne.Uint32(msg[8:]) != p.seq {
			continue // an answer to an earlier lookup
		}
		if ne.Uint16(msg[4:]) != unix.SOCK_DIAG_BY_FAMILY || n < nlmsgHeaderLen+inetDiagMsgLen {
			return 0, false // NLMSG_ERROR: not found
		}
		return ne.Uint32(msg[nlmsgHeaderLen+inetDiagUIDAt:]), true
	}
}

// reset closes a socket that failed; the next lookup opens another.
func (p *peerLookup) reset() {
	_ = unix.Close(p.fd)
	p.fd = -1
}

// close releases the netlink socket.
func (p *peerLookup) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd >= 0 {
		p.reset()
	}
	p.failed = true
}
