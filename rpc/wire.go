package rpc

import (
	"bufio"
	"net"
	"net/http"
	"sync"
	"time"
)

// What one connection holds and writes at the transport
// (docs/performance.md, "Per-connection costs").
//
//   - Reading: gorilla reads through a bufio.Reader of ReadBufferSize
//     bytes that it keeps for the life of the connection (its Conn has no
//     way to lend it back), so the buffer is as small as gorilla allows
//     and still holds a frame header and a control frame; a message
//     larger than it is read straight into the message's own buffer.
//     net/http's 4 KiB reader of the hijacked connection is let go.
//   - Writing: gorilla's write buffer comes from the upgrader's pool only
//     while a message is written; the writer writes the replies it found
//     queued together as one write of the TLS connection (wireConn's
//     cork), one TLS record and one write syscall for up to corkMax bytes,
//     instead of one of each per reply.
//   - crypto/tls keeps, per connection and with no way to release them,
//     its record input buffer and handshake buffer (sized by the largest
//     record received, usually the client's hello) and the two AEAD
//     states; its output buffer is pooled.

// ReadBufferSize is the websocket read buffer of a connection: room for
// a frame header (at most 14 bytes) and a control frame's 125-byte
// payload, which gorilla reads from the buffer in one piece. WriteBufferSize
// is gorilla's write buffer, taken from a pool only while a message is
// written. They are exported for the transport baseline (internal/echo),
// which must hold what a connection of this server holds.
const (
	ReadBufferSize  = 256
	WriteBufferSize = 4096
)

// corkMax is the most a corked wireConn gathers before it writes: the
// plaintext of one TLS record.
const corkMax = 16 << 10

// corkPool holds the buffers of corked wireConns, taken at cork and given
// back at uncork, so an idle connection holds none.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkMax); return &b }}

// wireConn is the connection gorilla reads and writes: the hijacked TLS
// connection, whose writes can be gathered. Between cork and uncork (the
// writer writing a batch of replies) every Write is appended to one
// buffer, written when it would go over corkMax, at flush and at uncork;
// any other time Write goes straight through. A control frame gorilla
// writes while the writer is corked (a ping, a pong, a close) joins the
// batch in its place in the stream. Its methods are safe for concurrent
// use.
type wireConn struct {
	net.Conn

	mu  sync.Mutex // guards buf and the writes of the connection
	buf *[]byte    // non-nil while corked
}

func (w *wireConn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil {
		return w.Conn.Write(p)
	}
	if len(*w.buf)+len(p) > corkMax {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) >= corkMax {
			return w.Conn.Write(p)
		}
	}
	*w.buf = append(*w.buf, p...)
	return len(p), nil
}

// cork starts gathering writes.
func (w *wireConn) cork() {
	w.mu.Lock()
	if w.buf == nil {
		w.buf = corkPool.Get().(*[]byte)
	}
	w.mu.Unlock()
}

// flush writes what was gathered, under deadline, and goes on gathering.
func (w *wireConn) flush(deadline time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil || len(*w.buf) == 0 {
		return nil
	}
	_ = w.Conn.SetWriteDeadline(deadline)
	return w.flushLocked()
}

// uncork writes what was gathered, under deadline, and stops gathering.
func (w *wireConn) uncork(deadline time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf == nil {
		return nil
	}
	var err error
	if len(*w.buf) > 0 {
		_ = w.Conn.SetWriteDeadline(deadline)
		err = w.flushLocked()
	}
	b := w.buf
	w.buf = nil
	*b = (*b)[:0]
	corkPool.Put(b)
	return err
}

func (w *wireConn) flushLocked() error {
	_, err := w.Conn.Write(*w.buf)
	*w.buf = (*w.buf)[:0]
	return err
}

// hijacker is the ResponseWriter the upgrader is given: its Hijack hands
// gorilla the connection as a wireConn.
type hijacker struct {
	http.ResponseWriter
	wire *wireConn
}

func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	h.wire = &wireConn{Conn: nc}
	return h.wire, brw, nil
}
