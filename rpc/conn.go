package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sync/semaphore"

	"github.com/provisiond/provisiond/rpc/params"
)

// Root serves the requests of one connection. The facade layer supplies
// one per connection (see Config.NewRoot); it holds the connection's login
// state and resources.
type Root interface {
	// FindMethod resolves a request: the one lookup of a call. It runs on
	// the reader, in read order, and must not block. An error is replied
	// at once, from the reader, so such errors keep their read order.
	FindMethod(req Request) (Caller, error)
	// Kill is called once when the connection ends, before rpc waits for
	// running calls: it must make blocked calls (watcher Next) return.
	Kill()
}

// Request is what routes a call: the header fields of one request.
type Request struct {
	RequestID uint64
	Facade    string // "type"
	Version   int
	ID        string // "id": the watcher id for watcher facades
	Method    string // "request"
}

// Caller runs one resolved request: the one call of a request, on a
// handler goroutine. ctx is the connection's context: it is cancelled
// when the connection ends. The result is encoded as the reply's
// "response"; a *Later result is answered when it replies.
type Caller interface {
	Call(ctx context.Context, params json.RawMessage) (any, error)
}

// CallerFunc adapts a function to Caller.
type CallerFunc func(ctx context.Context, params json.RawMessage) (any, error)

// Call calls f.
func (f CallerFunc) Call(ctx context.Context, params json.RawMessage) (any, error) {
	return f(ctx, params)
}

// ConnInfo describes a connection to the Root that serves it.
type ConnInfo struct {
	// ModelUUID is the model of the URL path; empty for /api and /.
	ModelUUID  string
	RemoteAddr string
}

// Conn is one websocket connection (the package doc has the contract).
// Its reader lives as long as it does: it reads and dispatches requests
// and tears the connection down. Its writer, which writes the queued
// replies and the pings, runs only while there is something to write, on
// the Server's worker pool, as do the handlers (at most
// Config.MaxRequests at once); a call that replies later (a watcher's
// Next, see Later) holds no goroutine while it waits, and an idle
// connection holds its reader alone.
type Conn struct {
	srv  *Server
	ws   *websocket.Conn
	wire *wireConn // the connection under ws, whose writes the writer corks
	info ConnInfo
	root Root

	ctx    context.Context
	cancel context.CancelFunc

	items *semaphore.Weighted // list items of running calls (limits.go); nil: no limit

	// room bounds the replies queued for the writer: maxQueued slots (a
	// send takes one) and Config.MaxUnsent bytes. The writer gives both
	// back once it has written (or dropped) a reply.
	slots chan struct{}
	bytes *semaphore.Weighted

	// notify wakes the reader's waits (a call was answered, Close, the
	// writer stopped). A send never blocks: a pending wake-up covers every
	// change made before it is taken.
	notify chan struct{}

	// ping calls pingDue every Config.PingPeriod: it starts the writer to
	// send a ping. writeFn is c.write, made once (the writer is started
	// once per batch).
	ping    *time.Timer
	writeFn func()

	mu sync.Mutex // guards the fields below
	// The reader's budget (limits.go).
	pending   int64 // bytes of the requests not yet answered
	calls     int   // calls not yet answered: at most Config.MaxRequests
	closed    bool  // Close was called: the reader stops waiting
	closeCode int   // close frame the server sends; 0: none
	// The writer's. Whoever queues a reply or finds a ping due starts the
	// writer unless it runs (writing); the writer stops only here, with
	// the queue empty and no ping due, so what is queued is always
	// written, by one writer at a time.
	queue    []outgoing // the replies, in the order given
	pingWant bool       // a ping is due
	writing  bool       // the writer runs
	dead     bool       // a write failed: replies are dropped
	ended    bool       // teardown is done with the writer: none starts again

	// endReason is why the connection ended (one of EndReasons): the
	// first cause found wins, so a read that fails because a write
	// failed, or because Close asked the reader to stop, keeps that
	// cause. Guarded by mu. endErr is the error behind it, for the log.
	endReason string
	endErr    error

	// pingOut is set when a ping is written and cleared by its pong: the
	// read deadline is moved to PongWait after the ping only while none is
	// outstanding, so a client that stops answering is still dropped.
	pingOut atomic.Bool
	// heard is when a frame was last read from the client (since epoch,
	// on the monotonic clock; the connection's start before any): a ping
	// is due only once nothing was heard for pingAfter (pingDue).
	heard atomic.Int64

	stopOnce sync.Once
	stopping atomic.Bool // set to ask the reader to stop
	// dropLater is set by teardown in the server's stop: the replies of
	// Later calls (a watcher's Next, answered because its watcher stops
	// with the connection) are dropped, not encoded and written
	// (Conn.push, writeBatch).
	dropLater atomic.Bool
	overLimit bool // the reader stopped at a message over the read limit (the reader's)
}

// Why a connection ended: the reason the Observer's ConnClosed is given,
// a small fixed set (EndReasons) for a metric's label.
const (
	// EndClientClosed: the client sent a close frame.
	EndClientClosed = "client_closed"
	// EndClientGone: the client's socket ended without a close frame (EOF,
	// reset): a client that died or dropped the connection.
	EndClientGone = "client_gone"
	// EndReadDeadline: nothing was read for Config.PongWait: no request,
	// and no pong within PongWait of a ping.
	EndReadDeadline = "read_deadline"
	// EndReadError: reading failed otherwise (a TLS or framing error).
	EndReadError = "read_error"
	// EndOverReadLimit: a message over the read limit (close code 1009).
	EndOverReadLimit = "over_read_limit"
	// EndMalformed: a message that is not a request or reply.
	EndMalformed = "malformed"
	// EndWriteTimeout: a write did not finish within Config.WriteTimeout
	// (a client that does not read).
	EndWriteTimeout = "write_timeout"
	// EndWriteFailed: a write failed otherwise.
	EndWriteFailed = "write_failed"
	// EndShutdown: the server shut down (Server.Shutdown) or drained
	// (Server.Drain).
	EndShutdown = "shutdown"
	// EndShed: the server handed the connection to another server of the
	// same service (Server.Shed, close code 1001).
	EndShed = "shed"
	// EndClosed: Conn.Close, from the layer above (a login that never
	// came, an agent that stopped pinging, its credentials changed).
	EndClosed = "closed"
)

// EndReasons are every reason a connection ends with.
var EndReasons = []string{EndClientClosed, EndClientGone, EndReadDeadline, EndReadError, EndOverReadLimit,
	EndMalformed, EndWriteTimeout, EndWriteFailed, EndShutdown, EndShed, EndClosed}

// outgoing is one reply for the writer: encoded (msg, holding a slot and
// its bytes of the room), or the reply of a Later call, which the writer
// encodes, so that whoever completed the call (the hub's publisher, a
// timer) is not held by it; such replies are bounded by the request
// slots instead.
type outgoing struct {
	msg   []byte
	buf   *replyBuf // msg's pooled buffer, if it is in one (encode)
	later *header   // a Later call's, replied
}

// laterCall is what a Later call keeps from its start (Conn.await): its
// start, and the reply once given, for the writer. It is kept in the
// call's header, which is the call's replier (header.reply): a call's
// one allocation in rpc.
type laterCall struct {
	start time.Duration // since epoch (monotonic): a word, not a time.Time's three
	res   any
	err   error
}

// epoch is what a Later call's start and when a connection last heard
// from its client (heard) are counted from, on the monotonic clock.
var epoch = time.Now()

// firstReply reports whether this is the first reply of h's Later call,
// marking it replied.
func (h *header) firstReply() bool { return atomic.CompareAndSwapUint32(&h.replied, 0, 1) }

// log returns the connection's logger: the server's, with the client's
// address. It is made when something is logged (rarely: errors, debug),
// not kept with each connection.
func (c *Conn) log() *slog.Logger { return c.srv.cfg.Logger.With("remote", c.info.RemoteAddr) }

// maxQueued bounds the encoded replies waiting to be written on one
// connection; the reader and handlers wait for room, so a client that
// stops reading stops being read (until the write deadline ends the
// connection).
const maxQueued = 64

// ErrConnClosed is the cause of a connection closed by the server.
var ErrConnClosed = errors.New("connection closed")

// Info returns what the connection was opened with.
func (c *Conn) Info() ConnInfo { return c.info }

// Close asks the connection to end: it stops reading, stops the root's
// resources, lets running calls reply, sends a close frame with code and
// closes the socket. It does not wait; Done is closed when it has ended.
func (c *Conn) Close(code int) { c.closeFor(code, EndClosed) }

// closeFor is Close, recording reason as why the connection ends.
func (c *Conn) closeFor(code int, reason string) {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		if c.closeCode == 0 {
			c.closeCode = code
		}
		c.setEndLocked(reason, nil)
		c.closed = true
		c.mu.Unlock()
		signal(c.notify)
		// stopping before the deadline: a reader setting its own deadline
		// after this one sees it (beforeRead).
		c.stopping.Store(true)
		_ = c.ws.SetReadDeadline(time.Now().Add(-time.Second))
	})
}

// Done is closed when the connection's context ends (the reader stopped).
func (c *Conn) Done() <-chan struct{} { return c.ctx.Done() }

func (c *Conn) setCloseCode(code int) {
	c.mu.Lock()
	if c.closeCode == 0 {
		c.closeCode = code
	}
	c.mu.Unlock()
}

// setEnd records reason (and err) as why the connection ends, unless a
// cause was found before.
func (c *Conn) setEnd(reason string, err error) {
	c.mu.Lock()
	c.setEndLocked(reason, err)
	c.mu.Unlock()
}

func (c *Conn) setEndLocked(reason string, err error) {
	if c.endReason == "" {
		c.endReason, c.endErr = reason, err
	}
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// readEndReason is why a failed read ends the connection.
func readEndReason(err error) string {
	var ce *websocket.CloseError
	switch {
	case errors.Is(err, websocket.ErrReadLimit):
		return EndOverReadLimit
	case errors.As(err, &ce):
		if ce.Code == websocket.CloseAbnormalClosure { // gorilla's for EOF without a close frame
			return EndClientGone
		}
		return EndClientClosed
	case isTimeout(err): // gorilla hides the deadline error behind its own
		return EndReadDeadline
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return EndClientGone
	}
	return EndReadError
}

// signal wakes ch's waiter without blocking: a wake-up already pending
// covers this one.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// waitLocked waits on the reader, with mu held, until done (called with
// mu held) reports true, or, if interruptible, the connection is closed;
// it reports whether done does. It returns with mu held.
func (c *Conn) waitLocked(done func() bool, interruptible bool) bool {
	for !done() {
		if interruptible && c.closed {
			return false
		}
		c.mu.Unlock()
		<-c.notify
		c.mu.Lock()
	}
	return true
}

// serve is the connection's reader: it starts the ping timer, reads
// requests until reading ends, tears the connection down, then calls
// ended with why it ended (one of EndReasons). Between requests it waits
// in gorilla's NextReader (readRequest), so its own frame is kept small:
// the work of a request is in functions that are not inlined here.
func (c *Conn) serve(ended func(reason string)) {
	c.writeFn = c.write
	c.mu.Lock() // pingDue reads ping under mu
	c.heard.Store(int64(time.Since(epoch)))
	c.ping = time.AfterFunc(c.srv.cfg.pingAfter(), c.pingDue)
	c.mu.Unlock()
	pongWait := c.srv.cfg.PongWait
	c.ws.SetPongHandler(func(string) error {
		c.pingOut.Store(false)
		now := time.Now()
		c.heard.Store(int64(now.Sub(epoch)))
		return c.ws.SetReadDeadline(now.Add(pongWait))
	})
	for c.beforeRead() && c.readRequest() {
	}
	c.srv.awaitClosePass()
	c.teardown()
	c.reportEnd(ended)
}

// reportEnd logs (at debug, unless the client closed it) why the
// connection ended and calls ended with it. Not inlined: its frame stays
// off the idle reader's stack (readRequest).
//
//go:noinline
func (c *Conn) reportEnd(ended func(reason string)) {
	c.mu.Lock()
	reason, err := c.endReason, c.endErr
	c.mu.Unlock()
	if reason == "" {
		reason = EndClosed // not reached: whatever stops the reader records why
	}
	if reason != EndClientClosed {
		c.log().Debug("connection ended", "reason", reason, "err", err)
	}
	ended(reason)
}

// teardown ends the connection, on the reader, once reading has ended.
func (c *Conn) teardown() {
	// In this order: no more requests (reading has ended); cancel the
	// calls' context and stop the root's resources, which answers the
	// waiting calls; wait for every call to be answered and the writer,
	// if one runs, to have written every reply and stopped (a call is
	// answered once its reply is queued, and the writer stops only with
	// the queue empty); no writer starts after that, not even for a ping;
	// send the close frame; close the socket.
	c.cancel()
	if c.srv.closing.Load() {
		// In a stop, what a waiting call would be told is moot: its
		// watcher was the connection's, and the client watches again once
		// it reconnects. Encoding and writing each agent's ten Next
		// replies took a stop of 10,000 agents 1.9 s instead of 1.1.
		c.dropLater.Store(true)
	}
	c.root.Kill()
	c.mu.Lock()
	c.waitLocked(func() bool { return c.calls == 0 && !c.writing }, false)
	c.ended = true
	dead, code := c.dead, c.closeCode
	c.mu.Unlock()
	c.ping.Stop()
	if c.overLimit {
		c.discardInput()
	}
	if !dead && code != 0 {
		_ = c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(code, ""), time.Now().Add(c.srv.cfg.WriteTimeout))
	}
	_ = c.ws.Close()
}

// beforeRead readies the reader for the next request: before login it
// waits until the previous request is answered and keeps the small read
// limit; it sets the read deadline. It reports false if the connection is
// closing.
//
//go:noinline
func (c *Conn) beforeRead() bool {
	// Before login: one request at a time, and a small read limit.
	if c.preLogin() && !c.waitIdle() {
		return false
	}
	c.ws.SetReadLimit(c.readLimit())
	now := time.Now() // a message was just read (or the connection began)
	c.heard.Store(int64(now.Sub(epoch)))
	if err := c.ws.SetReadDeadline(now.Add(c.srv.cfg.PongWait)); err != nil {
		return false
	}
	return !c.stopping.Load()
}

// preLogin reports whether the connection's root asks for a login it has
// not had yet.
func (c *Conn) preLogin() bool {
	auth, _ := c.root.(Authenticator)
	return auth != nil && !auth.Authenticated()
}

// readLimit is the read limit of the next message: the small one before
// login.
func (c *Conn) readLimit() int64 {
	if c.preLogin() {
		return c.srv.cfg.PreLoginReadLimit
	}
	return c.srv.cfg.ReadLimit
}

// readRequest waits for the next message, reads it and dispatches its
// request; it reports false when reading ends. An idle connection's reader
// waits here, in NextReader: what runs once a message has begun
// (readAndHandle) is not inlined, so that its frames are not on the
// idle reader's stack (with them there the stack went over 4 KiB and
// every idle connection held 8 KiB of stack instead of 4).
//
//go:noinline
func (c *Conn) readRequest() bool {
	_, r, err := c.ws.NextReader()
	if err != nil {
		return c.readFailed(err)
	}
	return c.readAndHandle(r)
}

// readAndHandle reads the message of r into a pooled buffer and
// dispatches its request; it reports false when reading ends.
//
//go:noinline
func (c *Conn) readAndHandle(r io.Reader) bool {
	bp := readPool.Get().(*[]byte)
	defer readPool.Put(bp)
	data, err := readMessage(r, *bp)
	if err != nil {
		return c.readFailed(err)
	}
	return c.handle(data)
}

// readFailed ends reading on err.
//
//go:noinline
func (c *Conn) readFailed(err error) bool {
	c.setEnd(readEndReason(err), err)
	if errors.Is(err, websocket.ErrReadLimit) {
		// gorilla has already sent close code 1009.
		c.log().Debug("message over the read limit", "limit", c.readLimit())
		c.overLimit = true
	}
	return false
}

// handle decodes the message data and dispatches its request; it reports
// false when reading ends. data may be a pooled buffer: the header keeps
// copies of what it holds (decodeHeader), not data.
//
//go:noinline
func (c *Conn) handle(data []byte) bool {
	h, err := decodeHeader(data)
	if err != nil {
		c.setEnd(EndMalformed, err)
		c.setCloseCode(websocket.CloseNormalClosure)
		return false
	}
	if !h.isRequest() {
		return true // a reply to a call the server never made
	}
	return c.dispatch(&h, int64(len(data)))
}

// readPoolSize is the size of the buffers a message is first read into:
// most requests (a watcher's Next, a status write) are far smaller.
const readPoolSize = 2 << 10

// readPool holds the buffers messages are read into and decoded from.
var readPool = sync.Pool{New: func() any { b := make([]byte, readPoolSize); return &b }}

// readMessage reads the message of r whole, as gorilla's ReadMessage
// does, into buf, a pooled buffer, when it fits: the message is decoded
// from there and nothing of it is kept (the header copies its strings and
// params), so a request that fits costs no allocation here.
// ReadMessage's io.ReadAll starts every message with 512 bytes, so each
// request of a hundred bytes cost five times its size. A message larger
// than buf grows from it as ReadAll grows, and is then its own.
//
//go:noinline
func readMessage(r io.Reader, buf []byte) ([]byte, error) {
	n, err := io.ReadFull(r, buf)
	switch err {
	case io.EOF, io.ErrUnexpectedEOF: // the whole message
		return buf[:n], nil
	case nil: // the buffer is full: more may follow
	default:
		return nil, err
	}
	rest, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return append(append(make([]byte, 0, n+len(rest)), buf[:n]...), rest...), nil
}

// waitIdle waits on the reader's goroutine until every request read so far
// is answered, or the connection closes; it reports false for the latter.
func (c *Conn) waitIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waitLocked(func() bool { return c.calls == 0 }, true) && !c.closed
}

// dispatch starts the call of h, a message of size bytes. While the
// requests being answered hold the read limit's worth of bytes, it first
// waits for some of them to be answered; it reports false if the
// connection closes meanwhile.
func (c *Conn) dispatch(h *header, size int64) bool {
	call, err := c.root.FindMethod(h.request())
	if err != nil {
		c.replyFromReader(h, false, err)
		return true
	}
	maxCalls, limit := c.srv.cfg.MaxRequests, c.srv.cfg.ReadLimit
	c.mu.Lock()
	// Only the reader adds calls: none is added between this check and
	// the count below.
	if c.calls >= maxCalls {
		c.mu.Unlock()
		c.replyFromReader(h, true, TooManyRequestsError(maxCalls))
		return true
	}
	if !c.waitLocked(func() bool { return c.pending == 0 || c.pending+size <= limit }, true) || c.closed {
		c.mu.Unlock()
		return false
	}
	c.pending += size
	c.calls++
	c.mu.Unlock()
	h.size = size
	h.cc = callCtx{conn: c}
	if h.FromRevision != nil {
		h.cc.rev = &callRevision{from: *h.FromRevision}
	}
	h.caller = call
	c.srv.workers.runTask(h) // h.runTask
	return true
}

// runTask runs the call of h on a worker (dispatch): the connection's run.
// h lets the Caller go: a Later call holds h until it is answered.
func (h *header) runTask() {
	call := h.caller
	h.caller = nil
	h.cc.conn.run(h, call)
}

// run is a call's handler, on a worker: it calls the method and queues
// its reply, or starts a Later and returns without waiting for it.
func (c *Conn) run(h *header, call Caller) {
	start := time.Now()
	res, err := c.call(h, call)
	h.Params = nil // decoded: a Later call does not keep them while it waits
	if l, ok := res.(*Later); ok && err == nil {
		c.await(h, l, start)
		return
	}
	writer := c.enqueue(c.encode(h, true, res, err, time.Since(start)))
	c.release(h)
	if writer {
		// This handler's worker becomes the writer: one hand-off fewer
		// per call than starting one on the pool.
		c.write()
	}
}

// release gives back what the call of h held once its reply is queued
// (encoded, for a Later call's): its MaxRequests slot, its items and its
// request's bytes.
func (c *Conn) release(h *header) {
	if h.cc.items > 0 {
		c.items.Release(h.cc.items)
	}
	c.mu.Lock()
	c.pending -= h.size
	c.calls--
	c.mu.Unlock()
	signal(c.notify)
}

// await starts l and returns without waiting for its reply: the call
// keeps its slot and is answered when l replies (header.reply), from
// any goroutine, or with the panic if l's start panics before replying.
// l is kept in h (a registered method's already is: newLater).
func (c *Conn) await(h *header, l *Later, start time.Time) {
	if l != &h.cc.later {
		h.cc.later = *l
		l = &h.cc.later
	}
	h.lc.start = start.Sub(epoch)
	if err := c.startLater(h, l); err != nil && h.firstReply() {
		h.lc.err = err // the panic, replied as a handler's is
		c.push(h)
	}
}

// startLater runs l's start, turning a panic into an error. The call
// keeps only what its reply needs while it waits: l's start and its
// facade instance (and, through it, the facade layer's call state) are
// let go before it starts, the request's params already (run).
func (c *Conn) startLater(h *header, l *Later) (err error) {
	var res any
	defer c.recoverPanic(h, &res, &err)
	start, f := l.start, l.f
	l.start, l.f = nil, nil
	start(f, &h.cc, h)
	return nil
}

// reply is a Later call's replier: it never blocks. The reply joins
// the queue in the order given, and the writer encodes it; a second reply
// is dropped.
func (h *header) reply(res any, err error) {
	c := h.cc.conn
	if !h.firstReply() {
		c.log().Error("a call replied twice; second reply dropped", "facade", h.Type, "method", h.Request)
		return
	}
	if mapErr := h.cc.later.mapErr; err != nil && mapErr != nil {
		err = mapErr(h.request(), err)
	}
	h.lc.res, h.lc.err = res, err
	c.push(h)
}

// call runs one handler, turning a panic into an error reply.
func (c *Conn) call(h *header, call Caller) (res any, err error) {
	defer c.recoverPanic(h, &res, &err)
	return call.Call(&h.cc, h.Params)
}

// recoverPanic, deferred, turns a panic of the call of h into its error.
func (c *Conn) recoverPanic(h *header, res *any, err *error) {
	if r := recover(); r != nil {
		// Operators get the panic, not Go source locations; the stack is
		// for developers, at debug level.
		c.log().Error("panic in request handler", "facade", h.Type, "version", h.Version,
			"method", h.Request, "panic", fmt.Sprint(r))
		c.log().Debug("panic in request handler: stack", "method", h.Request, "stack", string(debug.Stack()))
		*res, *err = nil, PanicError(r)
	}
}

// replyFromReader queues a reply the reader makes itself (an unknown
// method, no free request slot), in read order.
func (c *Conn) replyFromReader(h *header, resolved bool, err error) {
	if c.enqueue(c.encode(h, resolved, nil, err, 0)) {
		c.srv.workers.run(c.writeFn)
	}
}

// encode makes the reply frame to h. resolved says whether h named a
// method that exists; only then are its names passed to the Observer, so
// clients cannot mint metric labels. A result is encoded straight into a
// pooled buffer, framed there (for a V1 reply): the frame is msg, and rb,
// if not nil, is the buffer it is in, which the writer gives back once msg
// is written (writeBatch).
func (c *Conn) encode(h *header, resolved bool, res any, err error, d time.Duration) (msg []byte, rb *replyBuf) {
	var body json.RawMessage
	if err == nil && res != nil {
		rb = getReplyBuf()
		if !h.v0 {
			rb.b = appendReplyStart(rb.b, h.RequestID)
		}
		start := len(rb.b)
		merr := rb.enc.Encode(res) // what json.Marshal makes, and a newline
		size := int64(len(rb.b) - start - 1)
		switch limit := c.srv.cfg.MaxReplySize; {
		case merr != nil:
			c.log().Error("cannot encode reply", "facade", h.Type, "method", h.Request, "err", merr)
			err = &params.Error{Message: "cannot encode reply: " + merr.Error()}
		case size > limit:
			c.log().Warn("reply over the size limit not sent", "facade", h.Type, "method", h.Request,
				"size", size, "limit", limit)
			err = ReplyTooLargeError(size, limit)
		default:
			body = rb.b[start : len(rb.b)-1]
		}
	}
	if obs := c.srv.cfg.Observer; obs != nil {
		code := ""
		if err != nil {
			code = params.ErrCode(err)
			if code == "" {
				code = "error"
			}
		}
		facade, method := h.Type, h.Request
		if !resolved {
			facade, method = "", ""
		}
		obs.RequestDone(facade, h.Version, method, code, d)
	}
	if len(body) > 0 && !h.v0 {
		// The frame's start is before body already.
		rb.b = appendReplyEnd(rb.b[:len(rb.b)-1], h.cc.revision())
		return rb.b, rb
	}
	msg, merr := encodeReply(h, body, err)
	if merr != nil {
		c.log().Error("cannot encode reply frame", "err", merr)
		msg, _ = encodeReply(h, nil, &params.Error{Message: "cannot encode reply"})
	}
	rb.free() // msg holds a copy of body
	return msg, nil
}

// replyBuf is a buffer a reply is encoded and framed in, and the JSON
// encoder that writes into it: json.Marshal would return a copy of its
// own buffer, and the frame was a second one, two allocations per reply.
type replyBuf struct {
	b   []byte
	enc *json.Encoder // writes to b
}

// Write appends p to b: the encoder's writer.
func (rb *replyBuf) Write(p []byte) (int, error) {
	rb.b = append(rb.b, p...)
	return len(p), nil
}

// replyPoolMax is the largest buffer given back to replyPool: a buffer a
// large reply grew is left to the collector, not kept.
const replyPoolMax = 16 << 10

var replyPool = sync.Pool{New: func() any {
	rb := &replyBuf{}
	rb.enc = json.NewEncoder(rb) // escapes HTML, as json.Marshal does
	return rb
}}

// getReplyBuf returns an empty buffer from the pool.
func getReplyBuf() *replyBuf {
	rb := replyPool.Get().(*replyBuf)
	rb.b = rb.b[:0]
	return rb
}

// free gives rb back to the pool, unless it is nil or large; rb and what
// was framed in it must not be used after.
func (rb *replyBuf) free() {
	if rb != nil && cap(rb.b) <= replyPoolMax {
		replyPool.Put(rb)
	}
}

// encodeLater encodes the reply of a Later call and answers the call.
func (c *Conn) encodeLater(h *header) ([]byte, *replyBuf) {
	msg, rb := c.encode(h, true, h.lc.res, h.lc.err, time.Since(epoch)-h.lc.start)
	c.release(h)
	return msg, rb
}

// enqueue queues msg, an encoded reply (framed in rb if not nil, see
// encode), for the writer, waiting for room: one of maxQueued slots and
// its size in Config.MaxUnsent bytes (a reply larger than that waits
// until nothing else is unsent). The writer makes room as it writes, or
// drops the replies of a connection whose writes failed, so the wait ends
// within the write deadline. It reports whether the caller must run the
// writer (add).
func (c *Conn) enqueue(msg []byte, rb *replyBuf) (writer bool) {
	c.slots <- struct{}{}
	if n := c.weight(msg); !c.bytes.TryAcquire(n) {
		_ = c.bytes.Acquire(context.Background(), n)
	}
	return c.add(outgoing{msg: msg, buf: rb})
}

// weight is what msg takes of the MaxUnsent bytes.
func (c *Conn) weight(msg []byte) int64 { return min(int64(len(msg)), c.srv.cfg.MaxUnsent) }

// push queues the reply of a Later call without waiting: the Later calls
// are bounded by the request slots, and the writer encodes their replies
// within the unsent bound. Once teardown in the server's stop has begun
// (dropLater) the reply is dropped instead and the call counted answered.
func (c *Conn) push(h *header) {
	if c.dropLater.Load() {
		c.release(h) // answered: the call gives back its slot, unwritten
		return
	}
	if c.add(outgoing{later: h}) {
		c.srv.workers.run(c.writeFn) // whoever replied is not held
	}
}

// add queues o for the writer, without waiting. It reports whether the
// caller must run the writer, none running: then the caller calls write,
// on its own goroutine or on the pool's.
func (c *Conn) add(o outgoing) (writer bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queue == nil {
		c.queue = newQueue()
	}
	c.queue = append(c.queue, o)
	return c.startWriterLocked()
}

// queueArray is the array a connection's queue starts with: room for the
// replies one commit gives one agent (its ten watchers' Next), so that
// the queue does not grow from empty for each batch. The arrays are
// pooled: a connection holds one only while its writer runs, and one
// its queue outgrew is left to the collector, not kept.
type queueArray [16]outgoing

var queuePool = sync.Pool{New: func() any { return new(queueArray) }}

// newQueue returns an empty queue on a pooled array.
func newQueue() []outgoing { return queuePool.Get().(*queueArray)[:0] }

// freeQueue gives q's array back to the pool if it is a pooled one; q
// must not be used after. Its elements are already cleared (writeBatch
// clears each as it writes it; an empty queue holds none).
func freeQueue(q []outgoing) {
	if cap(q) == len(queueArray{}) {
		queuePool.Put((*queueArray)(q[:cap(q)]))
	}
}

// startWriterLocked, with mu held, reports whether the caller, who has
// just given the writer something to do, must start it: it does not run
// and teardown is not done with it. It marks it running.
func (c *Conn) startWriterLocked() bool {
	if c.writing || c.ended {
		return false
	}
	c.writing = true
	return true
}

// pingDue is the ping timer's function. A ping is due once nothing was
// heard from the client for pingAfter: then it re-arms the timer and has
// the writer send a ping, starting it unless it runs; a client heard from
// since (a request, a pong) is not pinged, and the timer is set for
// pingAfter after it was heard. So a Juju agent, which calls Pinger.Ping
// every minute, costs no websocket ping and pong besides
// (docs/performance.md, "Scale"). After teardown it does nothing.
func (c *Conn) pingDue() {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	after := c.srv.cfg.pingAfter()
	if quiet := time.Since(epoch) - time.Duration(c.heard.Load()); quiet < after {
		c.ping.Reset(after - quiet)
		c.mu.Unlock()
		return
	}
	c.ping.Reset(after)
	c.pingWant = true
	start := c.startWriterLocked()
	c.mu.Unlock()
	if start {
		c.srv.workers.run(c.writeFn)
	}
}

// write is the connection's writer, on a worker of the Server's pool
// (the handler's own, for a handler's reply), run by whoever queues a
// reply or finds a ping due when none runs: it sends the ping due, takes
// everything queued and writes it as one corked write (writeBatch), and
// stops once nothing is queued and no ping is due. It is the connection's only writer of data frames and
// pings (gorilla writes pongs and close frames from the reader, which
// WriteControl allows alongside).
func (c *Conn) write() {
	var spare []outgoing
	for {
		c.mu.Lock()
		ping := c.pingWant
		c.pingWant = false
		batch := c.queue
		if len(batch) > 0 {
			c.queue = spare[:0]
			spare = nil
		} else if !ping {
			// Nothing to do: the writer stops with the queue empty, under
			// the lock the queue is given under, so a reply queued from
			// now on starts a new one. An idle connection keeps no array:
			// the queue's and the spare go back to the pool.
			c.queue = nil
			c.writing = false
			c.mu.Unlock()
			freeQueue(batch)
			freeQueue(spare)
			signal(c.notify) // teardown may wait for the writer
			return
		}
		c.mu.Unlock()
		if ping {
			c.sendPing()
		}
		if len(batch) > 0 {
			spare = c.writeBatch(batch)
		}
	}
}

// take returns the queued replies, leaving spare's array (emptied) as the
// queue, or nil when none is queued.
func (c *Conn) take(spare []outgoing) []outgoing {
	c.mu.Lock()
	defer c.mu.Unlock()
	batch := c.queue
	if len(batch) == 0 {
		return nil
	}
	c.queue = spare[:0]
	return batch
}

// writeBatch writes batch, and what is queued while it does, as websocket
// text messages, in order, corked: gorilla frames each, and the frames go
// to the TLS connection in one write (wire.go), one TLS record and one
// syscall, cut where the bytes gathered would go over Config.MaxUnsent
// and at corkMax. The replies of Later calls are encoded here; once some
// were, Config.Settle (if set) lets whoever gives replies together
// finish before the queue is looked at again. It returns batch's
// array, emptied, for the next take. After a write error nothing more is
// written: the socket is closed, so the reader ends the connection, and
// the replies are dropped (their room given back, their calls answered).
// In the server's stop, the replies of Later calls are dropped unencoded
// once teardown has begun (dropLater).
func (c *Conn) writeBatch(batch []outgoing) []outgoing {
	cfg := &c.srv.cfg
	c.mu.Lock()
	err := errDead(c.dead)
	c.mu.Unlock()
	var gathered int64 // bytes gathered since the last write
	c.wire.cork()
	for {
		later := false
		for i := range batch {
			msg, rb := batch[i].msg, batch[i].buf
			if h := batch[i].later; h != nil {
				if c.dropLater.Load() { // queued before teardown began: dropped
					batch[i] = outgoing{}
					c.release(h)
					continue
				}
				msg, rb = c.encodeLater(h)
				later = true
			} else {
				c.bytes.Release(c.weight(msg))
				<-c.slots
			}
			batch[i] = outgoing{} // let the reply go
			if err == nil && gathered > 0 && gathered+int64(len(msg)) > cfg.MaxUnsent {
				err, gathered = c.wire.flush(time.Now().Add(cfg.WriteTimeout)), 0
			}
			if err == nil { // else dropped
				_ = c.ws.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
				err = c.ws.WriteMessage(websocket.TextMessage, msg)
				gathered += int64(len(msg))
			}
			rb.free() // gorilla has copied msg (to its buffer, or the cork's)
		}
		if later && cfg.Settle != nil && err == nil {
			cfg.Settle() // what is given with these replies is then queued
		}
		next := c.take(batch) // batch's array becomes the queue's
		if next == nil {
			break
		}
		batch = next
	}
	// What was gathered goes out even after an error: it may end in a
	// close frame gorilla wrote meanwhile.
	if ferr := c.wire.uncork(time.Now().Add(cfg.WriteTimeout)); err == nil {
		err = ferr
	}
	if err != nil {
		c.failWrite(err)
	}
	return batch[:0]
}

// errDead is the error of a connection whose writes failed before.
func errDead(dead bool) error {
	if dead {
		return ErrConnClosed
	}
	return nil
}

// sendPing sends a websocket ping, on the writer, unless its writes
// failed. Unless a ping is still unanswered, the client has PongWait from
// this ping to answer it, however late the ping timer or the writer ran:
// the reader's deadline, which every frame read moves to PongWait after
// it, could otherwise fall due PongWait - PingPeriod after the ping or
// sooner, too short a wait for a busy client or daemon.
func (c *Conn) sendPing() {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return
	}
	if c.pingOut.CompareAndSwap(false, true) {
		_ = c.ws.SetReadDeadline(time.Now().Add(c.srv.cfg.PongWait))
		if c.stopping.Load() { // Close's past deadline stands (Close, beforeRead)
			_ = c.ws.SetReadDeadline(time.Now().Add(-time.Second))
		}
	}
	err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.srv.cfg.WriteTimeout))
	if err != nil {
		c.failWrite(err)
	}
}

// failWrite ends a connection whose write failed with err: later replies
// are dropped and the socket is closed under the reader.
func (c *Conn) failWrite(err error) {
	c.mu.Lock()
	first := !c.dead
	c.dead = true
	c.mu.Unlock()
	if first {
		reason := EndWriteFailed
		if isTimeout(err) {
			reason = EndWriteTimeout
		}
		c.setEnd(reason, err)
		c.fail()
	}
}

// lingerTime bounds how long discardInput reads.
const lingerTime = time.Second

// discardInput reads and drops what the client is still sending, for up
// to lingerTime and the read limit's worth of bytes, before the socket is
// closed. Closing a socket with unread data resets the connection, and a
// reset can overtake the close frame (1009) the client should see; this is
// net/http's lingering close, for a message over the read limit.
func (c *Conn) discardInput() {
	nc := c.ws.NetConn()
	_ = nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, nc, c.srv.cfg.ReadLimit)
}

// fail ends a connection that cannot be written to: the socket is closed
// under the reader.
func (c *Conn) fail() {
	_ = c.ws.NetConn().Close()
}
