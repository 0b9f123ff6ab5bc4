package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
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

// Conn is one websocket connection. Its goroutines: the reader (started by
// Server.ServeHTTP after the upgrade, which then returns net/http's
// goroutine; the reader also tears the connection down) and nothing else
// while the connection is idle (see the package doc). Handlers (at most Config.MaxRequests
// at once) run on the Server's reused worker goroutines; a call that
// replies later (a watcher's Next, see Later) holds no goroutine while it
// waits. Replies are queued and written by a drain that runs on a worker
// only while the queue is not empty, so at most one goroutine writes data
// frames at a time; pings are sent from a timer.
type Conn struct {
	srv  *Server
	ws   *websocket.Conn
	wire *wireConn // the connection under ws, whose writes the drain corks
	info ConnInfo
	root Root

	ctx    context.Context
	cancel context.CancelFunc

	sem      chan struct{} // one slot per call not yet replied to
	handlers sync.WaitGroup
	items    *semaphore.Weighted // list items of running calls (limits.go); nil: no limit

	bmu     sync.Mutex // guards the request budget fields below
	bcond   sync.Cond  // on bmu: a call was answered or the connection closes
	pending int64      // bytes of the requests not yet answered
	calls   int        // requests not yet answered
	bclosed bool       // Close was called: the reader stops waiting

	rmu       sync.Mutex   // guards ready, answering and holds
	ready     []laterReply // Later replies given and not yet queued
	answering bool         // a worker is queuing the ready replies
	holds     int32        // HoldReplies not yet released: ready replies wait

	wmu     sync.Mutex // guards the write fields below
	wcond   sync.Cond  // on wmu: the queue shrank or the drain stopped
	queue   [][]byte   // replies waiting to be written
	unsent  int64      // bytes of the replies queued or being written
	writing bool       // a drain is running
	wdead   bool       // a write failed: later replies are dropped
	wclosed bool       // teardown began: the ping timer is not re-armed
	ping    *time.Timer

	stopOnce  sync.Once
	stopping  atomic.Bool // set to ask the reader to stop
	mu        sync.Mutex  // guards closeCode
	closeCode int         // close frame the server sends; 0: none
	overLimit bool        // the reader stopped at a message over the read limit
	nread     uint64      // messages read whole (the reader's)
	ended     func()      // called by the reader once the connection has ended
}

// log returns the connection's logger: the server's, with the client's
// address. It is made when something is logged (rarely: errors, debug),
// not kept with each connection.
func (c *Conn) log() *slog.Logger { return c.srv.cfg.Logger.With("remote", c.info.RemoteAddr) }

// maxQueued bounds the replies waiting to be written on one connection;
// the reader and handlers wait for room, so a client that stops reading
// stops being read (until the write deadline ends the connection).
const maxQueued = 64

// ErrConnClosed is the cause of a connection closed by the server.
var ErrConnClosed = errors.New("connection closed")

// Info returns what the connection was opened with.
func (c *Conn) Info() ConnInfo { return c.info }

// Close asks the connection to end: it stops reading, stops the root's
// resources, lets running calls reply, sends a close frame with code and
// closes the socket. It does not wait; Done is closed when it has ended.
func (c *Conn) Close(code int) {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		if c.closeCode == 0 {
			c.closeCode = code
		}
		c.mu.Unlock()
		c.stopping.Store(true)
		_ = c.ws.SetReadDeadline(time.Now().Add(-time.Second))
		c.bmu.Lock()
		c.bclosed = true
		c.bcond.Broadcast()
		c.bmu.Unlock()
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

// serve runs the connection until it ends, then calls ended; it is the
// reader (see read).
func (c *Conn) serve(ended func()) {
	c.ended = ended
	c.ping = time.AfterFunc(c.srv.cfg.PingPeriod, c.sendPing)
	pongWait := c.srv.cfg.PongWait
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(pongWait))
	})
	c.read(false)
}

// read is the connection's reader: it reads requests until reading ends,
// then tears the connection down, unless it hands its wait for the next
// request to a new goroutine (idle.go), which goes on as the reader with
// resumed set.
func (c *Conn) read(resumed bool) {
	if c.readLoop(resumed) {
		return
	}
	c.teardown()
	c.ended()
}

// teardown ends the connection, on the reader, once reading has ended.
func (c *Conn) teardown() {
	// In this order: no more requests; cancel waiting calls and stop
	// resources; wait for every call to reply; let the queue drain and
	// send the close frame; close the socket.
	c.cancel()
	c.root.Kill()
	c.handlers.Wait()
	c.wmu.Lock()
	c.wclosed = true
	for c.writing {
		c.wcond.Wait()
	}
	dead := c.wdead
	c.wmu.Unlock()
	c.ping.Stop()
	if c.overLimit {
		c.discardInput()
	}
	if !dead {
		c.mu.Lock()
		code := c.closeCode
		c.mu.Unlock()
		if code != 0 {
			_ = c.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(code, ""), time.Now().Add(c.srv.cfg.WriteTimeout))
		}
	}
	_ = c.ws.Close()
}

// readLoop reads and dispatches requests until reading ends (false) or it
// has handed the reader's wait to a new goroutine (true). Between
// requests it waits in wireConn.await, whose frames are the only ones
// above the poller's: its own frame is kept small, and the work of a
// request is in readRequest and beforeRead, not inlined here.
func (c *Conn) readLoop(resumed bool) bool {
	for {
		var handover time.Time
		if !resumed {
			if !c.beforeRead() {
				return false
			}
			handover = time.Now().Add(handoverAfter)
		}
		if c.wire.await(c.nread, c.srv.cfg.PongWait, handover, resumed) == waitedHandover {
			go c.read(true)
			return true
		}
		resumed = false
		if !c.readRequest() {
			return false
		}
	}
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
	if err := c.ws.SetReadDeadline(time.Now().Add(c.srv.cfg.PongWait)); err != nil {
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

// readRequest reads one message and dispatches its request; it reports
// false when reading ends.
//
//go:noinline
func (c *Conn) readRequest() bool {
	var data []byte
	_, r, err := c.ws.NextReader()
	if err == nil {
		data, err = readMessage(r)
	}
	if err != nil {
		if errors.Is(err, websocket.ErrReadLimit) {
			// gorilla has already sent close code 1009.
			c.log().Debug("message over the read limit", "limit", c.readLimit())
			c.overLimit = true
		}
		return false
	}
	c.nread++
	h, err := decodeHeader(data)
	if err != nil {
		c.log().Debug("closing connection on a malformed message", "err", err)
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

// readPool holds the buffers messages are read into before they are
// copied out at their size.
var readPool = sync.Pool{New: func() any { b := make([]byte, readPoolSize); return &b }}

// readMessage reads the message of r whole, as gorilla's ReadMessage
// does, into a slice of its own size: ReadMessage's io.ReadAll starts
// every message with 512 bytes, so each request of a hundred bytes cost
// five times its size (issue 16: 15% of the daemon's allocated bytes
// under watch at 100,000 watchers). A message larger than a pooled
// buffer grows from it and is copied out at its size, as ReadAll does.
//
// The reader waits for the next message in NextReader, with only
// readLoop's frame above it: readMessage, called once a message has
// begun, is kept out of readLoop (not inlined) so that its frame is not
// on the stack of the idle reader. With it there, the reader's stack
// went over 4 KiB and every idle connection held 8 KiB of stack instead
// of 4 (conns -n 3000: 8.0 KiB per agent against 3.98).
//
//go:noinline
func readMessage(r io.Reader) ([]byte, error) {
	bp := readPool.Get().(*[]byte)
	defer readPool.Put(bp)
	n, err := io.ReadFull(r, *bp)
	switch err {
	case io.EOF, io.ErrUnexpectedEOF: // the whole message
		return bytes.Clone((*bp)[:n]), nil
	case nil: // the buffer is full: more may follow
	default:
		return nil, err
	}
	// Larger than the pooled buffer: the rest as ReadAll reads it, and the
	// whole at its size (a call holds its request's bytes until it is
	// answered, and the read limit bounds them as bytes of messages, not
	// of the buffers grown).
	rest, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return append(append(make([]byte, 0, n+len(rest)), (*bp)[:n]...), rest...), nil
}

// waitIdle waits on the reader's goroutine until every request read so far
// is answered, or the connection closes; it reports false for the latter.
func (c *Conn) waitIdle() bool {
	c.bmu.Lock()
	defer c.bmu.Unlock()
	for c.calls > 0 && !c.bclosed {
		c.bcond.Wait()
	}
	return !c.bclosed
}

// dispatch starts the call of h, a message of size bytes. While the
// requests being answered hold the read limit's worth of bytes, it first
// waits for some of them to be answered; it reports false if the
// connection closes meanwhile.
func (c *Conn) dispatch(h *header, size int64) bool {
	call, err := c.root.FindMethod(h.request())
	if err != nil {
		c.replyFromReader(h, false, nil, err)
		return true
	}
	select {
	case c.sem <- struct{}{}:
	default:
		c.replyFromReader(h, true, nil, TooManyRequestsError(cap(c.sem)))
		return true
	}
	limit := c.srv.cfg.ReadLimit
	c.bmu.Lock()
	for c.pending > 0 && c.pending+size > limit && !c.bclosed {
		c.bcond.Wait()
	}
	if c.bclosed {
		c.bmu.Unlock()
		<-c.sem
		return false
	}
	c.pending += size
	c.calls++
	c.bmu.Unlock()
	h.size = size
	h.cc = callCtx{Context: c.ctx, conn: c}
	c.handlers.Add(1)
	c.srv.workers.run(func() { c.run(h, call) })
	return true
}

func (c *Conn) run(h *header, call Caller) {
	start := time.Now()
	res, err := c.call(h, call)
	if l, ok := res.(*Later); ok && err == nil {
		c.await(h, l, start)
		return
	}
	c.finish(h, res, err, start)
}

// finish replies to a call that started at start and, once the reply is
// queued, gives back what the call held: its MaxRequests slot, its items
// and its request's bytes.
func (c *Conn) finish(h *header, res any, err error, start time.Time) {
	c.reply(h, true, res, err, time.Since(start))
	c.release(h)
}

// release gives back what the call of h held once its reply is queued.
func (c *Conn) release(h *header) {
	if h.cc.items > 0 {
		c.items.Release(h.cc.items)
	}
	c.bmu.Lock()
	c.pending -= h.size
	c.calls--
	c.bcond.Broadcast()
	c.bmu.Unlock()
	<-c.sem
	c.handlers.Done()
}

// pendingCall is a Later call between its start and its reply.
type pendingCall struct {
	mu       sync.Mutex
	starting bool // still in Later.start: a reply is kept for the caller
	replied  bool
	res      any
	err      error
}

// await starts l and returns without waiting for its reply. A reply given
// while l starts (an event already pending) is sent from this goroutine;
// a later one joins the connection's ready replies (answerLater), since
// it comes from whichever goroutine completed the call (the hub's
// publisher, a timer) and must not block it.
func (c *Conn) await(h *header, l *Later, start time.Time) {
	p := &pendingCall{starting: true}
	mapErr := l.mapErr
	reply := func(res any, err error) {
		if err != nil && mapErr != nil {
			err = mapErr(h.request(), err)
		}
		p.mu.Lock()
		if p.replied {
			p.mu.Unlock()
			c.log().Error("a call replied twice; second reply dropped", "facade", h.Type, "method", h.Request)
			return
		}
		p.replied = true
		if p.starting {
			p.res, p.err = res, err
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		c.answerLater(laterReply{h: h, res: res, err: err, start: start})
	}
	_, perr := c.call(h, CallerFunc(func(ctx context.Context, _ json.RawMessage) (any, error) {
		l.start(ctx, reply)
		return nil, nil
	}))
	p.mu.Lock()
	p.starting = false
	replied, res, err := p.replied, p.res, p.err
	if perr != nil && !replied {
		// It panicked before replying: reply with the panic; a reply
		// that comes later anyway is dropped.
		p.replied, replied, res, err = true, true, nil, perr
	}
	p.mu.Unlock()
	if replied {
		c.finish(h, res, err, start)
	}
}

// laterReply is the reply of a Later call, given and not yet queued.
type laterReply struct {
	h     *header
	res   any
	err   error
	start time.Time
}

// answerLater queues r's reply from a worker, without blocking. One
// worker at a time answers the connection's ready replies (answerReady),
// so the replies given together (one commit waking several watchers of
// the connection) are queued together and written as one batch. While
// the connection is held (HoldReplies) the reply waits with the others
// given meanwhile, and the last ReleaseReplies starts the worker.
func (c *Conn) answerLater(r laterReply) {
	c.rmu.Lock()
	c.ready = append(c.ready, r)
	start := !c.answering && c.holds == 0
	if start {
		c.answering = true
	}
	c.rmu.Unlock()
	if start {
		c.srv.workers.run(c.answerReady)
	}
}

// ConnOf returns the connection of a call's context (the ctx a Caller or
// a Later's start is given), or nil for any other context.
func ConnOf(ctx context.Context) *Conn {
	if cc, _ := ctx.Value(callKey{}).(*callCtx); cc != nil {
		return cc.conn
	}
	return nil
}

// HoldReplies keeps the Later replies given on c from being queued until
// the matching ReleaseReplies, and ReleaseReplies lets them go: the
// replies given between a connection's first hold and its last release
// are encoded, queued and written together, in the order given (one
// batch: one write of the socket, one TLS record, for up to 16 KiB).
//
// It is for the code that completes several calls of a connection at
// once without knowing which is the last: the hub's publisher wakes a
// connection's watchers one by one for a commit, and without a hold the
// first reply starts the connection's worker, which can write it before
// the publisher has given the others (a commit's replies then leave in
// two writes or more). Holds nest; each must be released, promptly (the
// replies wait for it), and a hold does not delay replies already being
// written. Both never block.
func (c *Conn) HoldReplies() {
	c.rmu.Lock()
	c.holds++
	c.rmu.Unlock()
}

// ReleaseReplies ends a HoldReplies; the last one lets the replies given
// meanwhile go.
func (c *Conn) ReleaseReplies() {
	c.rmu.Lock()
	c.holds--
	if c.holds < 0 {
		c.rmu.Unlock()
		panic("rpc: ReleaseReplies without HoldReplies")
	}
	start := c.holds == 0 && !c.answering && len(c.ready) > 0
	if start {
		c.answering = true
	}
	c.rmu.Unlock()
	if start {
		c.srv.workers.run(c.answerReady)
	}
}

// answerReady encodes and queues the ready replies, writing them itself
// when no drain runs, until none is left or the connection is held (the
// last release starts it again); then it gives back what their calls
// held.
func (c *Conn) answerReady() {
	var msgs [][]byte
	for {
		c.rmu.Lock()
		batch := c.ready
		if len(batch) == 0 || c.holds > 0 {
			c.answering = false
			c.rmu.Unlock()
			return
		}
		c.ready = nil
		c.rmu.Unlock()
		msgs = msgs[:0]
		for _, r := range batch {
			msgs = append(msgs, c.encode(r.h, true, r.res, r.err, time.Since(r.start)))
		}
		c.enqueue(msgs, true)
		clear(msgs)
		for _, r := range batch {
			c.release(r.h)
		}
	}
}

// call runs one handler, turning a panic into an error reply.
func (c *Conn) call(h *header, call Caller) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			// Operators get the panic, not Go source locations; the
			// stack is for developers, at debug level.
			c.log().Error("panic in request handler", "facade", h.Type, "version", h.Version,
				"method", h.Request, "panic", fmt.Sprint(r))
			c.log().Debug("panic in request handler: stack", "method", h.Request, "stack", string(debug.Stack()))
			res, err = nil, PanicError(r)
		}
	}()
	return call.Call(&h.cc, h.Params)
}

// replyFromReader queues a reply the reader makes itself (an unknown
// method, no free request slot); a drain it starts runs on a worker, so
// the reader goes on reading.
func (c *Conn) replyFromReader(h *header, resolved bool, res any, err error) {
	c.enqueue([][]byte{c.encode(h, resolved, res, err, 0)}, false)
}

// reply encodes and queues the reply to h from a worker goroutine, which
// writes it itself if no drain is running (saving a hand-off).
func (c *Conn) reply(h *header, resolved bool, res any, err error, d time.Duration) {
	c.enqueue([][]byte{c.encode(h, resolved, res, err, d)}, true)
}

// encode makes the reply frame to h. resolved says whether h named a
// method that exists; only then are its names passed to the Observer, so
// clients cannot mint metric labels.
func (c *Conn) encode(h *header, resolved bool, res any, err error, d time.Duration) []byte {
	var body json.RawMessage
	if err == nil && res != nil {
		b, merr := json.Marshal(res)
		switch limit := c.srv.cfg.MaxReplySize; {
		case merr != nil:
			c.log().Error("cannot encode reply", "facade", h.Type, "method", h.Request, "err", merr)
			err = &params.Error{Message: "cannot encode reply: " + merr.Error()}
		case int64(len(b)) > limit:
			c.log().Warn("reply over the size limit not sent", "facade", h.Type, "method", h.Request,
				"size", len(b), "limit", limit)
			err = ReplyTooLargeError(int64(len(b)), limit)
		default:
			body = b
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
	msg, merr := encodeReply(h, body, err)
	if merr != nil {
		c.log().Error("cannot encode reply frame", "err", merr)
		msg, _ = encodeReply(h, nil, &params.Error{Message: "cannot encode reply"})
	}
	return msg
}

// enqueue queues msgs for writing, waiting while maxQueued replies are
// queued or the unsent replies would go over Config.MaxUnsent bytes (a
// reply alone may be larger), and starts a drain if none runs: on this
// goroutine if inline, else on a worker. The goroutine that starts a
// drain queues what fits first, so replies queued together are written
// together. Replies to a connection whose writes failed are dropped.
func (c *Conn) enqueue(msgs [][]byte, inline bool) {
	limit := c.srv.cfg.MaxUnsent
	for len(msgs) > 0 {
		drainer := false
		c.wmu.Lock()
		for len(msgs) > 0 && !c.wdead {
			size := int64(len(msgs[0]))
			if len(c.queue) >= maxQueued || (c.unsent > 0 && c.unsent+size > limit) {
				if drainer {
					break // the drain this goroutine starts makes room
				}
				c.wcond.Wait()
				continue
			}
			c.unsent += size
			c.queue = append(c.queue, msgs[0])
			msgs = msgs[1:]
			if !c.writing {
				c.writing = true
				drainer = true
			}
		}
		dead := c.wdead
		c.wmu.Unlock()
		if drainer {
			if inline {
				c.drain()
			} else {
				c.srv.workers.run(c.drain)
			}
		}
		if dead {
			return
		}
	}
}

// drain writes queued replies until the queue is empty, then stops. Only
// one drain runs at a time (Conn.writing), so it is the connection's only
// writer of data frames. It takes the whole queue at once and writes it
// corked (writeBatch). On a write error it closes the socket, so the
// reader ends the connection, and drops what is queued.
func (c *Conn) drain() {
	for {
		c.wmu.Lock()
		batch := c.queue
		c.queue = nil
		if len(batch) == 0 {
			c.writing = false
			c.wcond.Broadcast()
			c.wmu.Unlock()
			return
		}
		c.wcond.Broadcast()
		c.wmu.Unlock()
		err := c.writeBatch(batch)
		var n int64
		for i, msg := range batch {
			n += int64(len(msg))
			batch[i] = nil // let the written reply go
		}
		if err != nil {
			c.log().Debug("write failed; closing connection", "err", err)
			c.fail()
		}
		c.wmu.Lock()
		if err != nil {
			c.wdead = true
			c.queue = nil
			c.unsent = 0
			c.writing = false
		} else {
			c.unsent -= n
		}
		c.wcond.Broadcast()
		c.wmu.Unlock()
		if err != nil {
			return
		}
	}
}

// writeBatch writes msgs as websocket text messages, in order. Several
// are written corked: gorilla frames each, and the frames go to the TLS
// connection in one write (of up to corkMax bytes each), so one TLS
// record and one syscall carry them all.
func (c *Conn) writeBatch(msgs [][]byte) error {
	timeout := c.srv.cfg.WriteTimeout
	if len(msgs) == 1 {
		_ = c.ws.SetWriteDeadline(time.Now().Add(timeout))
		return c.ws.WriteMessage(websocket.TextMessage, msgs[0])
	}
	c.wire.cork()
	var err error
	for _, msg := range msgs {
		_ = c.ws.SetWriteDeadline(time.Now().Add(timeout))
		if err = c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			break
		}
	}
	// What was gathered goes out even after an error: it may end in a
	// close frame gorilla wrote meanwhile.
	if ferr := c.wire.uncork(time.Now().Add(timeout)); err == nil {
		err = ferr
	}
	return err
}

// sendPing sends a websocket ping (WriteControl may run alongside the
// drain) and re-arms its timer until teardown begins.
func (c *Conn) sendPing() {
	cfg := &c.srv.cfg
	if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(cfg.WriteTimeout)); err != nil {
		c.fail()
		return
	}
	c.wmu.Lock()
	if !c.wclosed {
		c.ping.Reset(cfg.PingPeriod)
	}
	c.wmu.Unlock()
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
