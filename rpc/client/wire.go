package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"
)

// corkMax is the most a corked connection gathers before it writes: the
// plaintext of one TLS record.
const corkMax = 16 << 10

// corkPool holds the buffers of corked connections while they gather.
var corkPool = sync.Pool{New: func() any { b := make([]byte, 0, corkMax); return &b }}

// wireConn is the TLS connection gorilla reads and writes. The reader
// corks it before it dispatches a message (whose completion may send
// calls: a watcher's next Next); whatever is written while corked is
// gathered and written when the reader next reads from the connection,
// that is when it has dispatched what it had read, or when corkMax bytes
// are gathered. So the calls sent in answer to the replies of one read
// leave in one write, one TLS record, instead of one each. A write from
// another goroutine while the reader dispatches waits with them, for at
// most the dispatch (done functions must be quick).
//
// The reader never waits for a write: if one is under way when it reads
// (a peer slow to read), that writer writes what was gathered before its
// own bytes, so the stream keeps its order and the reader goes on reading
// (which is what unblocks a peer that waits for its replies to be read).
// gorilla makes one Write at a time; the reader's flush runs beside it.
type wireConn struct {
	*tls.Conn

	wmu sync.Mutex // held while writing to the TLS connection

	mu     sync.Mutex // guards corked and buf
	corked bool
	buf    *[]byte // gathered writes, from corkPool; nil when none
}

func (w *wireConn) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.corked && (w.buf == nil || len(*w.buf)+len(p) <= corkMax) && len(p) < corkMax {
		if w.buf == nil {
			w.buf = corkPool.Get().(*[]byte)
		}
		*w.buf = append(*w.buf, p...)
		w.mu.Unlock()
		return len(p), nil
	}
	w.mu.Unlock()
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	return w.Conn.Write(p)
}

// Read stops gathering and writes what was gathered (unless a writer is
// under way, which writes it first), then reads.
func (w *wireConn) Read(p []byte) (int, error) {
	w.mu.Lock()
	w.corked = false
	pending := w.buf != nil
	w.mu.Unlock()
	if pending && w.wmu.TryLock() {
		_ = w.Conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		err := w.flushLocked()
		w.wmu.Unlock()
		if err != nil {
			return 0, fmt.Errorf("write: %w", err)
		}
	}
	return w.Conn.Read(p)
}

// cork gathers writes until the next Read.
func (w *wireConn) cork() {
	w.mu.Lock()
	w.corked = true
	w.mu.Unlock()
}

// flushLocked writes what was gathered; w.wmu is held.
func (w *wireConn) flushLocked() error {
	w.mu.Lock()
	b := w.buf
	w.buf = nil
	w.mu.Unlock()
	if b == nil {
		return nil
	}
	_, err := w.Conn.Write(*b)
	*b = (*b)[:0]
	corkPool.Put(b)
	return err
}

// dialTLS dials addr (bound to local, if set) and makes the TLS handshake
// under ctx: the websocket dialer's NetDialTLSContext, so that gorilla
// reads and writes a wireConn.
func dialTLS(ctx context.Context, addr string, local *net.TCPAddr, cfg *tls.Config) (net.Conn, error) {
	nd := &net.Dialer{}
	if local != nil {
		nd.LocalAddr = local
	}
	nc, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return &wireConn{Conn: tc}, nil
}
