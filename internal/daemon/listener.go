package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"net"
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
// counts it.

// limitListener is a net.Listener that keeps at most max accepted
// connections open.
type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func() // called for each connection closed over the cap
}

func newLimitListener(ln net.Listener, max int, refused func()) *limitListener {
	if refused == nil {
		refused = func() {}
	}
	return &limitListener{Listener: ln, max: int64(max), refused: refused}
}

// Accept returns the next connection under the cap; connections over it
// are closed here and never returned.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			l.refused()
			continue
		}
		return &limitConn{Conn: c, l: l, accepted: time.Now()}, nil
	}
}

// Open returns the number of accepted connections not yet closed.
func (l *limitListener) Open() int { return int(l.open.Load()) }

type limitConn struct {
	net.Conn
	l        *limitListener
	once     sync.Once
	accepted time.Time // when Accept returned it (the handshake gate's wait starts)

	// slot is the gate whose slot the handshake holds (nil: none), wrote
	// whether the server's flight has been written since (handshake.go).
	slot  atomic.Pointer[handshakeGate]
	wrote atomic.Bool
}

// SyscallConn is the socket's: the rpc reader waits on it for the next
// request without reading (rpc/idle.go).
func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
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
	// TestPreLoginMemoryBound.
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
