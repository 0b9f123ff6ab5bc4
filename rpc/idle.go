package rpc

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// What an idle connection's reader holds, and how it waits (issue 16;
// docs/performance.md, "Session 9: the idle reader's stack").
//
// A reader blocked in gorilla's NextReader waits under gorilla, bufio,
// crypto/tls and the net package: about 2.8 KiB of frames, so its stack
// is 4 KiB. The runtime never shrinks a stack while a quarter of it is in
// use (counting 800 bytes of guard), so a goroutine that has read once
// keeps 4 KiB however shallow it later waits. An idle reader therefore
// hands its wait to a new goroutine, whose stack is the runtime's
// starting size (2 KiB, where the shallow waits of idle readers keep
// the adaptive starting size), and ends, its stack freed. The new
// goroutine waits for the socket to become readable with only its own
// few frames above the poller, which it may do only while nothing is
// left unread above the socket:
//
//   - gorilla's buffer: the wireConn follows the websocket frames of what
//     it gave gorilla (frameTracker), so it knows when gorilla has been
//     given nothing past the end of the messages the reader has read;
//   - crypto/tls: plaintext of a record gorilla read only part of, and
//     whole records read ahead from the socket, which the socket will not
//     announce again. Between messages the reader itself reads one byte
//     of the TLS connection (into the stash, which gorilla is given
//     first) until it comes or handoverAfter has passed: on that timeout
//     crypto/tls holds nothing for it (a timeout is not kept by
//     crypto/tls, and gorilla never sees it), and the wait is handed over.
//
// Pongs (the answers to the server's pings) arrive while the connection
// is otherwise idle; the reader takes complete ones itself, moving the
// read deadline as gorilla's pong handler does, and hands over again
// once a read of the TLS connection with a passed deadline (probe) finds
// nothing more: an idle agent costs one new goroutine per ping (every
// 50 s by default) and one per request that comes after 100 ms of
// silence; busy connections none. What a wait costs a busy connection
// over gorilla's own blocking read: two more read deadlines set, and one
// more read of one byte.
//
// Without a way to peek at the socket (canPeek, Linux only) or with a
// connection that is not a socket (rawConn nil), the reader waits in
// gorilla as before.

// handoverAfter is how long a reader waits with nothing to read before it
// hands the wait to a new goroutine.
const handoverAfter = 100 * time.Millisecond

// frameTracker follows the websocket frames of the bytes given to gorilla.
// It reads headers only: lengths, the FIN bit and the opcode. A stream
// gorilla refuses ends the connection whatever the tracker made of it.
type frameTracker struct {
	hdr      [14]byte
	hn       int    // header bytes seen of the current frame
	op       byte   // first header byte of the current frame
	left     uint64 // payload bytes of the current frame not yet seen
	inFrame  bool   // in a frame's payload
	pending  bool   // bytes were given after the end of the last whole message
	messages uint64 // data messages whose final frame was given whole
}

// feed follows p, bytes given to gorilla after those fed before.
func (f *frameTracker) feed(p []byte) {
	for len(p) > 0 {
		if f.inFrame {
			n := min(uint64(len(p)), f.left)
			f.left -= n
			p = p[n:]
			if f.left == 0 {
				f.end()
			}
			continue
		}
		f.pending = true
		f.hdr[f.hn] = p[0]
		f.hn++
		p = p[1:]
		if f.hn < 2 {
			continue
		}
		need := 2
		switch f.hdr[1] & 0x7f {
		case 126:
			need += 2
		case 127:
			need += 8
		}
		if f.hdr[1]&0x80 != 0 {
			need += 4 // the mask key
		}
		if f.hn < need {
			continue
		}
		var n uint64
		switch l := f.hdr[1] & 0x7f; l {
		case 126:
			n = uint64(binary.BigEndian.Uint16(f.hdr[2:4]))
		case 127:
			n = binary.BigEndian.Uint64(f.hdr[2:10])
		default:
			n = uint64(l)
		}
		f.op, f.hn = f.hdr[0], 0
		if n == 0 {
			f.end()
		} else {
			f.left, f.inFrame = n, true
		}
	}
}

func (f *frameTracker) end() {
	f.inFrame = false
	if opcode, fin := f.op&0x0f, f.op&0x80 != 0; opcode < 8 && fin {
		f.messages++
		f.pending = false
	}
}

// drained reports whether gorilla, having returned read whole messages,
// holds none of the bytes it was given: they end with the final frame of
// message number read.
func (f *frameTracker) drained(read uint64) bool {
	return !f.pending && f.messages == read
}

// stashPool holds the stash buffers. A stash is taken only once bytes
// have come (a wait reads into wireConn.one) and goes back once gorilla
// has taken it, so a waiting reader holds none; stashSize has room for a
// whole pong frame (131 bytes at most) and what follows it.
var stashPool = sync.Pool{New: func() any { b := make([]byte, 0, stashSize); return &b }}

const stashSize = 256

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

// Read gives gorilla what a probe read first, then reads the connection.
// The reader alone calls it.
func (w *wireConn) Read(p []byte) (int, error) {
	if w.stash == nil {
		n, err := w.Conn.Read(p)
		w.frames.feed(p[:n])
		return n, err
	}
	n := copy(p, (*w.stash)[w.off:])
	w.frames.feed(p[:n])
	w.off += n
	if w.off == len(*w.stash) {
		w.dropStash()
	}
	return n, nil
}

func (w *wireConn) dropStash() {
	*w.stash = (*w.stash)[:0]
	stashPool.Put(w.stash)
	w.stash, w.off = nil, 0
}

// SetReadDeadline sets the connection's read deadline and remembers it:
// a read with an earlier deadline of its own (readBefore) puts it back.
func (w *wireConn) SetReadDeadline(t time.Time) error {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	w.deadline = t
	return w.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines, remembering the read deadline.
func (w *wireConn) SetDeadline(t time.Time) error {
	w.dmu.Lock()
	defer w.dmu.Unlock()
	w.deadline = t
	return w.Conn.SetDeadline(t)
}

// waited is what await found.
type waited int

const (
	waitedRead     waited = iota // something may be there to read: read it
	waitedHandover               // idle: hand the wait over to a new goroutine
)

// await returns once the reader has something to read, or an error to
// meet: at once while gorilla holds bytes of the stream, or when the
// connection cannot be waited on; otherwise it reads the TLS connection
// into the stash itself (see the top of this file). read is the number
// of messages the reader has read; a non-zero handover is when to hand
// over if nothing came by then. fresh is set on a goroutine a reader
// handed over to: nothing has reached crypto/tls since its predecessor
// found it empty, so it first waits for the socket to be readable, with
// no frame of crypto/tls on its stack. A reader that read only pongs
// hands over too, once crypto/tls holds nothing more.
func (w *wireConn) await(read uint64, pongWait time.Duration, handover time.Time, fresh bool) waited {
	if w.raw == nil || w.stash != nil || !w.frames.drained(read) {
		return waitedRead
	}
	if fresh {
		if err := w.raw.Read(peekReadable); err != nil {
			return waitedRead // the deadline or a closed socket: the read says which
		}
	}
	pongs := false
	for {
		var got bool
		var err error
		if pongs {
			got, err = w.probe()
		} else {
			got, err = w.readUntil(handover)
		}
		switch {
		case got && w.takePongs(pongWait):
			return waitedRead
		case got:
			pongs = true // only pongs: what else crypto/tls holds, then hand over
		case err == errCut:
			return waitedHandover // handover came, or crypto/tls holds nothing after pongs
		case err != nil:
			return waitedRead // the deadline or the connection's end: the read meets it again
		}
	}
}

// errCut is readBefore's report that its own, earlier deadline passed.
var errCut = errors.New("rpc: read cut short")

// readBefore reads the connection into p with the read deadline moved to
// t while t is not zero and earlier than the deadline asked for, which it
// then puts back; a timeout of t's own is errCut. crypto/tls does not
// keep a timeout: a read after it goes on where this one stopped.
func (w *wireConn) readBefore(t time.Time, p []byte) (int, error) {
	w.dmu.Lock()
	early := !t.IsZero() && (w.deadline.IsZero() || t.Before(w.deadline))
	if early {
		_ = w.Conn.SetReadDeadline(t)
	}
	w.dmu.Unlock()
	n, err := w.Conn.Read(p)
	if !early {
		return n, err
	}
	w.dmu.Lock()
	d := w.deadline
	_ = w.Conn.SetReadDeadline(d)
	w.dmu.Unlock()
	if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && (d.IsZero() || time.Now().Before(d)) {
		return 0, errCut
	}
	return n, err
}

// readUntil reads one byte of the connection into the stash (crypto/tls
// keeps the rest of its record), waiting until the read deadline or, when
// it is earlier and not zero, until handover (errCut).
func (w *wireConn) readUntil(handover time.Time) (bool, error) {
	n, err := w.readBefore(handover, w.one[:])
	if n == 1 {
		s := w.stashBuf()
		*s = append(*s, w.one[0])
	}
	return n == 1, err
}

// probe adds to the stash what crypto/tls holds for the reader, without
// reading the socket: with its read deadline passed, the read returns
// what crypto/tls holds, or errCut. got reports bytes added.
func (w *wireConn) probe() (got bool, err error) {
	s := w.stashBuf()
	b := *s
	n, err := w.readBefore(aLongTimeAgo, b[len(b):cap(b)])
	*s = b[:len(b)+n]
	if len(*s) == 0 {
		w.dropStash()
	}
	return n > 0, err
}

// stashBuf returns the stash, taking a buffer for it if there is none,
// with what gorilla has not taken moved to its front.
func (w *wireConn) stashBuf() *[]byte {
	if w.stash == nil {
		w.stash, w.off = stashPool.Get().(*[]byte), 0
	} else if w.off > 0 {
		n := copy(*w.stash, (*w.stash)[w.off:])
		*w.stash, w.off = (*w.stash)[:n], 0
	}
	return w.stash
}

// takePongs takes the whole pong frames at the front of the stash as
// gorilla's pong handler would (the read deadline moves to now +
// pongWait), reading the rest of one from what crypto/tls holds, and
// reports whether anything is left for gorilla.
func (w *wireConn) takePongs(pongWait time.Duration) bool {
	for w.stash != nil {
		b := (*w.stash)[w.off:]
		// A client's pong: FIN and opcode 10, masked, at most 125 bytes.
		if b[0] != 0x8a || len(b) > 1 && (b[1]&0x80 == 0 || b[1]&0x7f > 125) {
			return true
		}
		need := 2
		if len(b) > 1 {
			need = 2 + 4 + int(b[1]&0x7f)
		}
		if len(b) < need {
			if got, _ := w.probe(); !got {
				return true // the rest is not here yet: gorilla reads it
			}
			continue
		}
		w.off += need
		if w.off == len(*w.stash) {
			w.dropStash()
		}
		_ = w.SetReadDeadline(time.Now().Add(pongWait))
	}
	return false
}

// rawConn returns the socket under c to wait on: c's own, or that of the
// connection a TLS connection (or a wrapper with NetConn) runs over. It
// returns nil when there is none or readiness cannot be peeked here.
func rawConn(c any) syscall.RawConn {
	if !canPeek {
		return nil
	}
	for range 4 {
		if sc, ok := c.(syscall.Conn); ok {
			if raw, err := sc.SyscallConn(); err == nil {
				return raw
			}
			return nil
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = nc.NetConn()
	}
	return nil
}
