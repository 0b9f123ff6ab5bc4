package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"provisiond/rpc/params"
)

// Root serves the requests of one connection. The facade layer supplies
// one per connection (see Config.NewRoot); it holds the connection's login
// state and resources.
type Root interface {
	// FindMethod resolves a request. An error is replied at once, from the
	// reader, so such errors keep their read order.
	FindMethod(facade string, version int, id, method string) (Caller, error)
	// Kill is called once when the connection ends, before rpc waits for
	// running calls: it must make blocked calls (watcher Next) return.
	Kill()
}

// Caller runs one resolved request with its raw params. ctx is the
// connection's context: it is cancelled when the connection ends.
type Caller func(ctx context.Context, params json.RawMessage) (any, error)

// ConnInfo describes a connection to the Root that serves it.
type ConnInfo struct {
	// ModelUUID is the model of the URL path; empty for /api and /.
	ModelUUID  string
	RemoteAddr string
}

// Conn is one websocket connection. Its goroutines: the reader (the HTTP
// handler's goroutine, which also tears the connection down), one writer,
// and at most Config.MaxRequests handlers, run on the Server's reused
// worker goroutines and waited for by the Conn.
//
// Replies are written in the order they are ready. A reply that finds
// nothing queued and nobody writing is written by the goroutine that made
// it (a handler, or the reader for the errors it answers), which saves a
// lone call the hand-off to the writer and the wake-up that goes with it;
// otherwise it queues for the writer goroutine, which writes the queue in
// order, one frame at a time, whenever nobody else is writing.
type Conn struct {
	srv  *Server
	ws   *websocket.Conn
	info ConnInfo
	root Root
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	out        chan []byte   // replies to write; closed by the reader after handlers end
	writerDead chan struct{} // closed when the writer stopped writing

	// wmu guards writing, pending and dead; wcond (on wmu) tells the
	// writer goroutine that writing has become false.
	wmu     sync.Mutex
	wcond   *sync.Cond
	writing bool // a goroutine is writing a data frame
	pending int  // replies sent to out and not yet written
	dead    bool // a data frame write failed: drop replies

	sem      chan struct{} // one slot per running handler
	handlers sync.WaitGroup

	stopOnce  sync.Once
	stopc     chan struct{} // closed to ask the reader to stop
	mu        sync.Mutex    // guards closeCode
	closeCode int           // close frame the server sends; 0: none
}

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
		close(c.stopc)
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

// serve runs the connection until it ends; it is the reader.
func (c *Conn) serve() {
	go c.writeLoop()
	c.readLoop()

	// Teardown, in this order: no more requests; cancel blocked calls and
	// stop resources; wait for running calls to reply; let the writer drain
	// and send the close frame; close the socket.
	c.cancel()
	c.root.Kill()
	c.handlers.Wait()
	close(c.out)
	<-c.writerDead
	_ = c.ws.Close()
}

func (c *Conn) readLoop() {
	cfg := &c.srv.cfg
	c.ws.SetReadLimit(cfg.ReadLimit)
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(cfg.PongWait))
	})
	for {
		if err := c.ws.SetReadDeadline(time.Now().Add(cfg.PongWait)); err != nil {
			return
		}
		select {
		case <-c.stopc:
			return
		default:
		}
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				// gorilla has already sent close code 1009.
				c.log.Debug("message over the read limit", "limit", cfg.ReadLimit)
			}
			return
		}
		h, err := decodeHeader(data)
		if err != nil {
			c.log.Debug("closing connection on a malformed message", "err", err)
			c.setCloseCode(websocket.CloseNormalClosure)
			return
		}
		if !h.isRequest() {
			continue // a reply to a call the server never made
		}
		c.dispatch(&h)
	}
}

func (c *Conn) dispatch(h *header) {
	call, err := c.root.FindMethod(h.Type, h.Version, h.ID, h.Request)
	if err != nil {
		c.reply(h, false, nil, err, 0)
		return
	}
	select {
	case c.sem <- struct{}{}:
	default:
		c.reply(h, true, nil, TooManyRequestsError(cap(c.sem)), 0)
		return
	}
	c.handlers.Add(1)
	c.srv.workers.run(func() { c.run(h, call) })
}

func (c *Conn) run(h *header, call Caller) {
	defer c.handlers.Done()
	defer func() { <-c.sem }()
	start := time.Now()
	res, err := c.call(h, call)
	c.reply(h, true, res, err, time.Since(start))
}

// call runs one handler, turning a panic into an error reply.
func (c *Conn) call(h *header, call Caller) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("panic in request handler", "facade", h.Type, "version", h.Version,
				"method", h.Request, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, err = nil, PanicError(r)
		}
	}()
	return call(c.ctx, h.Params)
}

// reply encodes and queues the reply to h. resolved says whether h named a
// method that exists; only then are its names passed to the Observer, so
// clients cannot mint metric labels.
func (c *Conn) reply(h *header, resolved bool, res any, err error, d time.Duration) {
	var body json.RawMessage
	if err == nil && res != nil {
		b, merr := json.Marshal(res)
		if merr != nil {
			c.log.Error("cannot encode reply", "facade", h.Type, "method", h.Request, "err", merr)
			err = &params.Error{Message: "cannot encode reply: " + merr.Error()}
		} else {
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
		c.log.Error("cannot encode reply frame", "err", merr)
		msg, _ = encodeReply(h, nil, &params.Error{Message: "cannot encode reply"})
	}
	c.send(msg)
}

// send writes msg on this goroutine if no reply is queued and nobody is
// writing, else queues it for the writer.
func (c *Conn) send(msg []byte) {
	c.wmu.Lock()
	if c.dead {
		c.wmu.Unlock()
		return
	}
	if !c.writing && c.pending == 0 {
		c.writing = true
		c.wmu.Unlock()
		err := c.writeData(msg)
		c.wmu.Lock()
		c.writing = false
		if err != nil {
			c.dead = true
		}
		if c.pending > 0 {
			c.wcond.Signal()
		}
		c.wmu.Unlock()
		if err != nil {
			c.log.Debug("write failed; closing connection", "err", err)
			c.fail()
		}
		return
	}
	c.pending++
	c.wmu.Unlock()
	select {
	case c.out <- msg:
	case <-c.writerDead:
	}
}

// writeData writes one data frame; the caller holds the writing token.
func (c *Conn) writeData(msg []byte) error {
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.srv.cfg.WriteTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, msg)
}

// writeLoop writes the queued replies, in order, each once nobody else is
// writing (see send), sends websocket pings and, once the reader closes
// out, the close frame. Every data frame write has the write deadline; on a
// write error the socket is closed so the reader ends the connection.
func (c *Conn) writeLoop() {
	cfg := &c.srv.cfg
	defer close(c.writerDead)
	ping := time.NewTicker(cfg.PingPeriod)
	defer ping.Stop()
	for {
		select {
		case msg, ok := <-c.out:
			if !ok {
				c.mu.Lock()
				code := c.closeCode
				c.mu.Unlock()
				if code != 0 {
					_ = c.ws.WriteControl(websocket.CloseMessage,
						websocket.FormatCloseMessage(code, ""), time.Now().Add(cfg.WriteTimeout))
				}
				return
			}
			c.wmu.Lock()
			for c.writing {
				c.wcond.Wait()
			}
			dead := c.dead
			c.writing = !dead
			c.wmu.Unlock()
			var err error
			if !dead {
				err = c.writeData(msg)
			}
			c.wmu.Lock()
			c.writing = false
			c.pending--
			if err != nil {
				c.dead = true
			}
			c.wmu.Unlock()
			if dead || err != nil {
				if err != nil {
					c.log.Debug("write failed; closing connection", "err", err)
				}
				c.fail()
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(cfg.WriteTimeout)); err != nil {
				c.fail()
				return
			}
		}
	}
}

// fail ends a connection whose writer cannot write: the socket is closed
// under the reader. Handlers see writerDead and drop their replies.
func (c *Conn) fail() {
	_ = c.ws.NetConn().Close()
}
