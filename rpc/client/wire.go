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
// most the dispatch (done functions must be quick). Its methods are safe
// for concurrent use.
type wireConn struct {
	*tls.Conn

	mu     sync.Mutex // guards the fields below and the connection's writes
	corked bool
	buf    *[]byte // gathered writes, from corkPool
}

func (w *wireConn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.corked {
		return w.Conn.Write(p)
	}
	if w.buf == nil {
		w.buf = corkPool.Get().(*[]byte)
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

// Read writes what was gathered, then reads.
func (w *wireConn) Read(p []byte) (int, error) {
	if err := w.uncork(); err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	return w.Conn.Read(p)
}

// cork gathers writes until the next Read.
func (w *wireConn) cork() {
	w.mu.Lock()
	w.corked = true
	w.mu.Unlock()
}

func (w *wireConn) uncork() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.corked = false
	if w.buf == nil {
		return nil
	}
	var err error
	if len(*w.buf) > 0 {
		_ = w.Conn.SetWriteDeadline(time.Now().Add(writeTimeout))
		err = w.flushLocked()
	}
	*w.buf = (*w.buf)[:0]
	corkPool.Put(w.buf)
	w.buf = nil
	return err
}

func (w *wireConn) flushLocked() error {
	_, err := w.Conn.Write(*w.buf)
	*w.buf = (*w.buf)[:0]
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
