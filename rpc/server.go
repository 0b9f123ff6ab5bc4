package rpc

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sync/semaphore"
)

// Observer receives connection and request events, for metrics. Its
// methods are called from many goroutines and must not block. RequestDone
// gets empty facade and method names for requests that named no known
// method; code is "" on success and "error" for an error without a code.
// ConnClosed gets why the connection ended, one of EndReasons. A Later
// call whose reply a stop drops (Conn.push) gets no RequestDone.
type Observer interface {
	ConnOpened()
	ConnClosed(reason string)
	RequestDone(facade string, version int, method, code string, d time.Duration)
}

// Config configures a Server. Zero durations and limits take the defaults
// below.
type Config struct {
	// NewRoot makes the Root that serves a new connection.
	NewRoot func(info ConnInfo, c *Conn) Root
	Logger  *slog.Logger

	// ReadLimit is the largest message accepted; a larger one closes the
	// connection with code 1009. Default 4 MiB. The requests being served
	// on one connection hold at most this many bytes of messages between
	// them: the reader waits for answers before reading more.
	ReadLimit int64
	// PreLoginReadLimit is the read limit of a connection whose Root is an
	// Authenticator that has not authenticated. Default 64 KiB.
	PreLoginReadLimit int64
	// MaxBulkItems bounds the list items of one call's params (code "quota
	// limit exceeded" over it), and the items of the calls running on one
	// connection at once (a call waits for its share). Default 20,000.
	MaxBulkItems int
	// MaxReplySize is the largest reply sent; a call whose reply is larger
	// gets code "quota limit exceeded" instead. Default 64 MiB.
	MaxReplySize int64
	// MaxUnsent bounds the bytes of the replies of one connection waiting
	// to be written (one reply alone may be larger); a handler that would
	// go over it waits. Default 16 MiB.
	MaxUnsent int64
	// MaxRequests bounds the calls running at once on one connection; a
	// request over it is answered with code "try again". Default 1024.
	MaxRequests int
	// MaxConns bounds open connections; over it the upgrade is refused with
	// HTTP 503. Default 0: no limit.
	MaxConns int
	// Admit, if set, is asked before each upgrade: a non-nil error refuses
	// it with HTTP 503 and the error's text (a daemon holding more than
	// its share of the agents of several that serve them: a client dialling
	// every address it knows connects to another). It is called on the
	// request's goroutine, and must be quick.
	Admit func() error
	// WriteTimeout is the write deadline of each message. A client that
	// stops reading is disconnected after it. Default 30 s.
	WriteTimeout time.Duration
	// PingPeriod is how often the server sends websocket pings to a
	// client it hears nothing else from (one it heard from is pinged once
	// it has been quiet for PingPeriod and a twentieth: pingAfter);
	// PongWait is how long it waits for any frame before closing, and how
	// long a client has to answer a ping from when it was sent. Defaults
	// 60 s and 90 s, Juju's (apiserver/websocket: PingPeriod, PongDelay);
	// a PingPeriod not under PongWait is two thirds of it.
	PingPeriod time.Duration
	PongWait   time.Duration

	// Settle, if set, returns once whoever is answering several Later
	// calls at a time has given the replies it is giving: the daemon's is
	// the watcher hub's Sync, which waits for the publish under way, whose
	// sinks answer every Next of a connection that one commit wakes. A
	// connection's writer calls it after encoding replies of Later calls
	// and before it looks for more, so that replies given together are
	// written together, in one write of the socket. It must wait for
	// nothing else, and briefly.
	Settle func()

	Observer Observer
}

// Defaults for Config.
const (
	DefaultReadLimit         = 4 << 20
	DefaultPreLoginReadLimit = 64 << 10
	DefaultMaxBulkItems      = 20000
	DefaultMaxReplySize      = 64 << 20
	DefaultMaxUnsent         = 16 << 20
	DefaultMaxRequests       = 1024
	DefaultWriteTimeout      = 30 * time.Second
	DefaultPingPeriod        = 60 * time.Second
	DefaultPongWait          = 90 * time.Second
)

func (c *Config) setDefaults() {
	if c.ReadLimit <= 0 {
		c.ReadLimit = DefaultReadLimit
	}
	if c.MaxRequests <= 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	if c.PreLoginReadLimit <= 0 {
		c.PreLoginReadLimit = DefaultPreLoginReadLimit
	}
	c.PreLoginReadLimit = min(c.PreLoginReadLimit, c.ReadLimit)
	if c.MaxBulkItems <= 0 {
		c.MaxBulkItems = DefaultMaxBulkItems
	}
	if c.MaxReplySize <= 0 {
		c.MaxReplySize = DefaultMaxReplySize
	}
	if c.MaxUnsent <= 0 {
		c.MaxUnsent = DefaultMaxUnsent
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.PongWait <= 0 {
		c.PongWait = DefaultPongWait
	}
	if c.PingPeriod <= 0 || c.PingPeriod >= c.PongWait {
		c.PingPeriod = c.PongWait * 2 / 3 // DefaultPingPeriod of DefaultPongWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server is the http.Handler of the API endpoints: /api, / and
// /model/<uuid>/api. It upgrades each request to a websocket and serves it
// as one Conn. It tracks its connections so Shutdown can end them
// (http.Server.Shutdown does not see hijacked connections).
type Server struct {
	cfg      Config
	upgrader websocket.Upgrader

	workers *workerPool

	// A connection's start takes mu; its end takes no lock of the
	// server's (a stop ends thousands at once, and on a starved box each
	// end queued on one mutex took a scheduling round of its own).
	mu sync.Mutex // held to admit a request: closing's check, wg.Add
	// admitted counts the requests that passed the MaxConns check and
	// have not ended, upgrading ones included: checking the connections
	// alone let concurrent upgrades past the cap. Raised with mu held,
	// lowered without.
	admitted atomic.Int64
	closing  atomic.Bool // set with mu held; from then on no request is admitted
	draining atomic.Bool // Drain began: no request is admitted, open connections close over its time
	wg       sync.WaitGroup
	conns    sync.Map     // the open connections: *Conn -> struct{}
	nconns   atomic.Int64 // how many
	// passed is closed once Shutdown has told every connection to close
	// (awaitClosePass); passOnce closes it.
	passed   chan struct{}
	passOnce sync.Once
}

// NewServer returns a server; cfg.NewRoot is required.
func NewServer(cfg Config) (*Server, error) {
	if cfg.NewRoot == nil {
		return nil, errors.New("rpc: Config.NewRoot is required")
	}
	cfg.setDefaults()
	return &Server{
		cfg: cfg,
		upgrader: websocket.Upgrader{
			// A small read buffer of gorilla's own, held for the life of
			// the connection (wire.go); net/http's 4 KiB reader of the
			// hijacked connection is let go with its request.
			ReadBufferSize:  ReadBufferSize,
			WriteBufferSize: WriteBufferSize,
			// A pool keeps idle connections from each pinning a write buffer.
			WriteBufferPool:   &sync.Pool{},
			CheckOrigin:       func(*http.Request) bool { return true },
			EnableCompression: false,
		},
		workers: newWorkerPool(workerIdle),
		passed:  make(chan struct{}),
	}, nil
}

// ParsePath returns the model UUID of an API path: "" for "/" and "/api",
// the UUID for "/model/<uuid>/api"; ok is false for any other path.
func ParsePath(path string) (modelUUID string, ok bool) {
	switch path {
	case "/", "/api":
		return "", true
	}
	rest, found := strings.CutPrefix(path, "/model/")
	if !found {
		return "", false
	}
	uuid, found := strings.CutSuffix(rest, "/api")
	if !found || uuid == "" || strings.Contains(uuid, "/") {
		return "", false
	}
	return uuid, true
}

// ServeHTTP upgrades the request and serves the connection until it ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	modelUUID, ok := ParsePath(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if s.closing.Load() || s.draining.Load() {
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return
	}
	if s.cfg.Admit != nil {
		if err := s.cfg.Admit(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	s.mu.Lock()
	if s.closing.Load() { // Shutdown's wg.Wait may have begun
		s.mu.Unlock()
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return
	}
	if s.cfg.MaxConns > 0 && s.admitted.Load() >= int64(s.cfg.MaxConns) { // only ends lower it meanwhile
		s.mu.Unlock()
		http.Error(w, "too many connections", http.StatusServiceUnavailable)
		return
	}
	s.admitted.Add(1)
	s.wg.Add(1)
	s.mu.Unlock()
	release := func() {
		s.admitted.Add(-1)
		s.wg.Done()
	}

	hj := &hijacker{ResponseWriter: w}
	ws, err := s.upgrader.Upgrade(hj, r, nil)
	if err != nil {
		release()
		return // the upgrader has answered the client
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		srv:    s,
		ws:     ws,
		wire:   hj.wire,
		info:   ConnInfo{ModelUUID: modelUUID, RemoteAddr: r.RemoteAddr},
		ctx:    ctx,
		cancel: cancel,
		items:  newItemBudget(s.cfg.MaxBulkItems),
		slots:  make(chan struct{}, maxQueued),
		bytes:  semaphore.NewWeighted(s.cfg.MaxUnsent),
		notify: make(chan struct{}, 1),
	}
	c.root = s.cfg.NewRoot(c.info, c)

	// Registered before closing and draining are read, as Shutdown and
	// Drain set them before they list the connections: one of the two
	// closes c, or both.
	s.conns.Store(c, struct{}{})
	s.nconns.Add(1)
	if s.closing.Load() || s.draining.Load() {
		c.closeFor(websocket.CloseGoingAway, EndShutdown)
	}
	// The connection is served on a goroutine of its own and this handler
	// returns: net/http then lets go of its per-request state (its 4 KiB
	// write buffer, the request) and of the handler goroutine, whose stack
	// the TLS handshake grew to 16 KiB. A hijacked connection stays open.
	obs := s.cfg.Observer
	if obs != nil {
		obs.ConnOpened()
	}
	go c.serve(func(reason string) {
		s.conns.Delete(c)
		s.nconns.Add(-1)
		if obs != nil {
			obs.ConnClosed(reason)
		}
		release()
	})
}

// Conns returns the number of open connections.
func (s *Server) Conns() int {
	return int(s.nconns.Load())
}

// Shutdown refuses new connections, closes every open one (close code
// 1001, going away) and waits for them to end or for ctx. When ctx ends
// first, the sockets of the connections still open are closed under them
// (a reply being written, or a close frame, is cut off; calls still
// running end with their connection's context) and Shutdown returns
// ctx's error without waiting for their goroutines, which end on their
// own.
func (s *Server) Shutdown(ctx context.Context) error {
	s.workers.stop()
	s.mu.Lock()
	s.closing.Store(true) // a connection registered from now on closes itself
	s.mu.Unlock()
	eachInChunks(s.open(), func(c *Conn) { c.closeFor(websocket.CloseGoingAway, EndShutdown) })
	s.passOnce.Do(func() { close(s.passed) })
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		eachInChunks(s.open(), func(c *Conn) { _ = c.ws.Close() }) // the socket only: safe beside the reader and writer
		return ctx.Err()
	}
}

// Drain refuses new connections and closes the open ones (close code
// 1001, going away), spread evenly over the duration over in steps of
// drainStep, so that their clients reconnect elsewhere a share at a time
// instead of all at once (a rolling restart of daemons sharing a store:
// the others take this one's agents at the pace they can). It returns
// once every connection has been told to close (its calls under way are
// answered first, as in Shutdown), or when ctx ends. The connections end
// one by one, each counted out as on any other end. Shutdown comes after
// it, for what is left.
func (s *Server) Drain(ctx context.Context, over time.Duration) error {
	s.draining.Store(true)
	conns := s.open()
	steps := max(1, int(over/drainStep))
	t := time.NewTicker(max(over/time.Duration(steps), time.Millisecond))
	defer t.Stop()
	for i := range steps {
		for _, c := range conns[len(conns)*i/steps : len(conns)*(i+1)/steps] {
			c.closeFor(websocket.CloseGoingAway, EndShutdown)
		}
		if i == steps-1 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Shed closes up to n of the open connections that have logged in
// (a connection whose Root is an Authenticator that has not authenticated
// is left alone), with close code 1001 (going away), as a drain closes
// each: calls under way are answered first, and the client reconnects as
// it would after any server's stop. It returns how many it told to close.
// Which ones is left to the map's order: no client is favoured.
func (s *Server) Shed(n int) int {
	if n <= 0 || s.closing.Load() || s.draining.Load() {
		return 0
	}
	shed := 0
	s.conns.Range(func(k, _ any) bool {
		c := k.(*Conn)
		if c.preLogin() || c.stopping.Load() {
			return true
		}
		c.closeFor(websocket.CloseGoingAway, EndShed)
		shed++
		return shed < n
	})
	return shed
}

// drainStep is how often Drain closes its next share of the connections.
const drainStep = 100 * time.Millisecond

// awaitClosePass holds a connection's teardown, once its reader has
// ended, while Shutdown is still telling the connections to close. A stop
// that told 19,872 connections to close from one goroutine, on a box whose
// load generators left the daemon a fraction of a core, had told some
// 11,000 after 15 s: each connection told wakes its reader, whose teardown
// (stopping ten watchers, the close frame, the socket) then competed for
// the CPU, and the telling goroutine, each time it was preempted, waited
// behind thousands of them on the scheduler's queues. Telling them in
// chunks on goroutines of their own (eachInChunks) still left 2,381 of
// 14,286 untold after 15 s, eight chunks' goroutines never started. A
// reader held here runs for a moment and parks until the pass is done.
func (s *Server) awaitClosePass() {
	if s.closing.Load() {
		<-s.passed
	}
}

// stopChunk is how many connections one goroutine of a stop closes.
const stopChunk = 256

// eachInChunks runs f on every connection, stopChunk connections to a
// goroutine, the goroutines all started before any runs, and waits for
// them: what a stop does to every connection gets more of the CPU than
// one goroutine's share among thousands (awaitClosePass).
func eachInChunks(conns []*Conn, f func(*Conn)) {
	var wg sync.WaitGroup
	for i := 0; i < len(conns); i += stopChunk {
		chunk := conns[i:min(i+stopChunk, len(conns))]
		wg.Go(func() {
			for _, c := range chunk {
				f(c)
			}
		})
	}
	wg.Wait()
}

// open returns the open connections.
func (s *Server) open() []*Conn {
	open := make([]*Conn, 0, s.nconns.Load())
	s.conns.Range(func(c, _ any) bool {
		open = append(open, c.(*Conn))
		return true
	})
	return open
}

// pingAfter is how long a connection is quiet (nothing read from its
// client) before the server pings it: PingPeriod and a twentieth, so that
// a client with its own ping at PingPeriod (a Juju agent's Pinger.Ping
// every minute) is heard first, and never as long as PongWait, by which
// the read deadline set at the last frame read ends the connection.
func (c *Config) pingAfter() time.Duration {
	return min(c.PingPeriod+c.PingPeriod/20, c.PingPeriod+(c.PongWait-c.PingPeriod)/2)
}

// workerIdle is how long an idle handler goroutine waits for another
// request before it exits.
const workerIdle = 2 * time.Second

// workerPool runs request handlers and connections' writers on reused
// goroutines. A new goroutine
// starts with a small stack that a typical handler (JSON decoding, a bbolt
// read, the facade) grows by copying it several times: at thousands of
// calls a second that was a sixth of the daemon's CPU (provisionbench rpc).
// A worker keeps its grown stack for the next request. Workers that stay
// idle for workerIdle exit, as do idle ones once the pool is stopped, so
// an idle daemon holds none; the runtime's GC shrinks the stacks of
// workers blocked in long calls (watcher Next).
type workerPool struct {
	work     chan task // unbuffered: a send succeeds only if a worker is idle
	quit     chan struct{}
	quitOnce sync.Once
	idle     time.Duration
	live     atomic.Int64 // workers running, busy or idle (tests count them)
}

func newWorkerPool(idle time.Duration) *workerPool {
	return &workerPool{work: make(chan task), quit: make(chan struct{}), idle: idle}
}

// task is what a worker runs: a call (*header, which holds what its run
// needs, so a call costs no closure) or a function (funcTask).
type task interface{ runTask() }

// funcTask is a function as a task (a func value is one pointer: it
// becomes a task without an allocation).
type funcTask func()

func (f funcTask) runTask() { f() }

// run runs fn on an idle worker, or on a new one if none is idle. It never
// waits.
func (p *workerPool) run(fn func()) { p.runTask(funcTask(fn)) }

// runTask is run for a task.
func (p *workerPool) runTask(t task) {
	select {
	case p.work <- t:
	default:
		go p.worker(t)
	}
}

func (p *workerPool) worker(first task) {
	p.live.Add(1)
	defer p.live.Add(-1)
	first.runTask()
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		select {
		case next := <-p.work:
			next.runTask()
			t.Reset(p.idle)
		case <-t.C:
			return
		case <-p.quit:
			return
		}
	}
}

// stop makes idle workers exit; busy ones exit when their call returns.
// Later run calls still work, each on a new goroutine.
func (p *workerPool) stop() { p.quitOnce.Do(func() { close(p.quit) }) }
