package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/rpc/params"
)

// Defaults and fixed timings.
const (
	// DefaultServerName is the TLS server name Juju's Go clients verify.
	DefaultServerName = "juju-apiserver"
	// DefaultReadLimit is the default maximum size of one incoming message.
	DefaultReadLimit int64 = 64 << 20
	// DefaultDialTimeout bounds Dial when Config.DialTimeout is zero.
	DefaultDialTimeout = 30 * time.Second
	// DefaultPingTimeout is how long a ping of the pinger may take when
	// Config.PingTimeout is zero: Juju's client's.
	DefaultPingTimeout = 30 * time.Second

	writeTimeout = 10 * time.Second    // deadline of every outgoing message
	closeWait    = time.Second         // how long Close waits for the peer's close frame
	bufferSize   = 64 << 10            // default buffer sizes, as Juju's Go dialer
	origin       = "http://localhost/" // as Juju's Go clients
	minTLS       = tls.VersionTLS12    // spec §2.2
	defaultPing  = time.Minute         // Juju's api.PingPeriod
	closedReason = "closed by client"  // cause recorded by Close
	pingerReason = "ping failed"       // close-frame text sent by the pinger
	badMsgReason = "malformed message" // close-frame text on undecodable replies
	abnormalCode = websocket.CloseAbnormalClosure
)

// ErrConnClosed is wrapped by every error caused by the connection ending.
var ErrConnClosed = errors.New("connection closed")

// ErrPingFailed is wrapped by Err when the pinger ended the connection: a
// Ping failed or went unanswered for Config.PingTimeout, 30 s by default
// (Juju's client does the same).
var ErrPingFailed = errors.New(pingerReason)

// Config says where and how to connect.
type Config struct {
	// Addr is host:port of the API server (IPv6 as [addr]:port).
	Addr string
	// ModelUUID selects wss://Addr/model/<uuid>/api; empty selects
	// wss://Addr/api (controller-only login).
	ModelUUID string
	// CACert is the PEM CA certificate the server certificate must chain to.
	CACert []byte
	// ServerName is the name verified in the server certificate; default
	// "juju-apiserver".
	ServerName string
	// DialTimeout bounds the TCP, TLS and WebSocket handshakes; default 30 s.
	DialTimeout time.Duration
	// ReadLimit is the maximum size of one incoming message; default 64 MiB,
	// negative for no limit. A larger message ends the connection with close
	// code 1009.
	ReadLimit int64
	// Logger receives debug and warning records; nil discards them.
	Logger *slog.Logger
	// ReadBufferSize and WriteBufferSize are the websocket I/O buffer sizes
	// of the connection; zero means 64 KiB each, as Juju's Go dialer. A
	// process holding thousands of connections (provisionbench) sets them
	// small: messages larger than a buffer are still read and written whole.
	ReadBufferSize, WriteBufferSize int
	// LocalAddr, if set, is the local address the TCP connection is bound
	// to (for example another loopback address, so that many connections
	// to one server do not exhaust one address's ephemeral ports).
	LocalAddr *net.TCPAddr
	// SessionCache keeps TLS sessions for resumption: a new connection
	// to a server that gave this process a session ticket resumes it, an
	// abbreviated handshake without the certificate's signature and
	// check. Nil uses one cache shared by the process; each Config's
	// sessions are kept apart by address and CA certificate, so a session
	// is offered only to the server address and CA it was made with.
	// Resumption needs the server to offer tickets (provisiond does: a
	// resumed handshake skips the certificate's signature and its check,
	// docs/performance.md, "TLS session resumption"); without
	// them every connection makes a full handshake, as it does with
	// NoSessionCache.
	SessionCache tls.ClientSessionCache
	// NoSessionCache makes every connection a full handshake.
	NoSessionCache bool
	// PingTimeout is how long a Ping of the pinger (StartPinger) may take
	// before the pinger ends the connection; zero or less means 30 s, as
	// Juju's client. A process running thousands of simulated agents on
	// a box it shares (provisionbench) may set it longer: there the 30 s
	// can pass while the process itself waits to run, which a real agent
	// on a machine of its own does not.
	PingTimeout time.Duration
	// CurvePreferences, if set, are the key exchanges the TLS handshake
	// offers, in order (crypto/tls's Config.CurvePreferences: the first
	// is the one the ClientHello carries a key share for); nil offers Go's
	// defaults, the post-quantum hybrid X25519MLKEM768 first. A Juju agent
	// built with Go 1.21 (Juju at the commit this project follows) offers
	// X25519, P-256, P-384 and P-521 (JujuAgentCurves); provisionbench's
	// agents can offer the same.
	CurvePreferences []tls.CurveID
	// Trace, if set, is called with every message the connection sends
	// (sent true, just before it is written) and receives (just after it
	// is read, before it is parsed), for debugging and wire tests. It runs
	// on the sending goroutine or the reader: it must be quick, must not
	// call the Conn, and must not keep msg. It sees what logins send,
	// passwords included.
	Trace func(sent bool, msg []byte)
}

// JujuAgentCurves are the key exchanges a Go 1.21 client offers by
// default, as Juju's agents at the commit this project follows do: X25519
// (its key share), then P-256, P-384 and P-521; no post-quantum hybrid.
var JujuAgentCurves = []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}

// URL returns the WebSocket URL cfg dials.
func (cfg Config) URL() string {
	u := url.URL{Scheme: "wss", Host: cfg.Addr, Path: "/api"}
	if cfg.ModelUUID != "" {
		u.Path = "/model/" + cfg.ModelUUID + "/api"
	}
	return u.String()
}

// Conn is one RPC connection. See the package documentation for its
// goroutines and concurrency contract.
type Conn struct {
	ws  *websocket.Conn
	cfg Config
	log *slog.Logger

	lastID  atomic.Uint64
	writeMu sync.Mutex

	mu          sync.Mutex
	pending     map[uint64]pendingCall // nil once the connection ended
	err         error                  // why it ended; nil while open
	closeCode   int
	closing     bool // Close has been called
	pinger      *pinger
	onEnd       []func() // OnEnd's functions, run once when it ends
	loginResult *params.LoginResult

	done       chan struct{} // closed when the connection ends
	readerDone chan struct{}
	closeOnce  sync.Once
	wg         sync.WaitGroup
}

// reply is what the reader hands to a waiting call.
type reply struct {
	err      *params.Error
	response json.RawMessage
	revision uint64 // the reply's "revision" (CallFrom)
}

// pendingCall is a call waiting for its reply: Call waits on ch; a call
// started by Go has done instead, which the reader runs.
type pendingCall struct {
	ch   chan reply
	done func(reply, error) // the reply, or why the connection ended
}

// request is the V1 request frame.
type request struct {
	RequestID uint64 `json:"request-id"`
	Type      string `json:"type"`
	Version   int    `json:"version"`
	ID        string `json:"id"`
	Request   string `json:"request"`
	Params    any    `json:"params,omitempty"`
	// FromRevision is provisiond's own header key (CallFrom).
	FromRevision *uint64 `json:"from-revision,omitempty"`
}

// header decodes both V1 and legacy V0 replies. encoding/json matches keys
// case-insensitively, so "Error"/"Response" fill the V1 fields; only the
// hyphenated keys need their V0 twins.
type header struct {
	RequestID   uint64          `json:"request-id"`
	RequestIDV0 uint64          `json:"RequestId"`
	Type        string          `json:"type"`
	Request     string          `json:"request"`
	Error       json.RawMessage `json:"error"`
	ErrorCode   string          `json:"error-code"`
	ErrorCodeV0 string          `json:"ErrorCode"`
	ErrorInfo   map[string]any  `json:"error-info"`
	Response    json.RawMessage `json:"response"`
	Revision    uint64          `json:"revision"`
}

// Dial connects and starts the connection's reader goroutine. The caller
// must Close the returned Conn.
// DialStatusError is a dial the server answered with an HTTP status
// instead of the upgrade: 503 from a daemon that is stopping or draining,
// or holds more than its share of the agents of several, with the others
// to go to (the address's next dial may be admitted; another address is).
type DialStatusError struct {
	URL        string
	StatusCode int
	Status     string
	Err        error
}

func (e *DialStatusError) Error() string {
	return fmt.Sprintf("client: dial %s: %v (HTTP %s)", e.URL, e.Err, e.Status)
}

func (e *DialStatusError) Unwrap() error { return e.Err }

func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = withDefaults(cfg)
	ws, err := dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		ws:         ws,
		cfg:        cfg,
		log:        cfg.Logger.With("addr", cfg.Addr, "model", cfg.ModelUUID),
		pending:    make(map[uint64]pendingCall),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	c.wg.Add(1)
	go c.readLoop()
	c.log.Debug("rpc client connected", "url", cfg.URL())
	return c, nil
}

// DialRaw does Dial's TLS and path handling but returns the bare gorilla
// connection (with the read limit applied) and starts no goroutine. It is
// meant for wire tests that send malformed frames. The caller owns and must
// close the returned connection.
func DialRaw(ctx context.Context, cfg Config) (*websocket.Conn, error) {
	return dial(ctx, withDefaults(cfg))
}

func withDefaults(cfg Config) Config {
	if cfg.ServerName == "" {
		cfg.ServerName = DefaultServerName
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.ReadLimit == 0 {
		cfg.ReadLimit = DefaultReadLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReadBufferSize <= 0 {
		cfg.ReadBufferSize = bufferSize
	}
	if cfg.WriteBufferSize <= 0 {
		cfg.WriteBufferSize = bufferSize
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = DefaultPingTimeout
	}
	return cfg
}

func dial(ctx context.Context, cfg Config) (*websocket.Conn, error) {
	if cfg.Addr == "" {
		return nil, errors.New("client: no address")
	}
	pool, err := caPool(cfg.CACert)
	if err != nil {
		return nil, err
	}
	if cfg.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.DialTimeout)
		defer cancel()
	}
	tlsCfg := &tls.Config{
		RootCAs:            pool,
		ServerName:         cfg.ServerName,
		MinVersion:         minTLS,
		ClientSessionCache: sessionCache(cfg),
		CurvePreferences:   cfg.CurvePreferences,
	}
	d := websocket.Dialer{
		NetDialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return dialTLS(ctx, addr, cfg.LocalAddr, tlsCfg)
		},
		HandshakeTimeout: cfg.DialTimeout,
		ReadBufferSize:   cfg.ReadBufferSize,
		WriteBufferSize:  cfg.WriteBufferSize,
		// Proxy is deliberately nil: the daemon is dialled directly.
	}
	hdr := http.Header{"Origin": []string{origin}}
	u := cfg.URL()
	ws, resp, err := d.DialContext(ctx, u, hdr)
	if err != nil {
		if resp != nil {
			return nil, &DialStatusError{URL: u, StatusCode: resp.StatusCode, Status: resp.Status, Err: err}
		}
		return nil, fmt.Errorf("client: dial %s: %w", u, err)
	}
	if cfg.ReadLimit > 0 {
		ws.SetReadLimit(cfg.ReadLimit)
	}
	return ws, nil
}

// caPools holds the CA pools of the CA certificates dialled so far (up to
// maxCAPools of them), so that a process dialling many connections (an
// agent reconnecting, provisionbench's thousands of agents) parses its CA
// once, not per dial. A CertPool is safe for concurrent use once made.
var caPools struct {
	sync.Mutex
	m map[string]*x509.CertPool
}

const maxCAPools = 16

// caPool returns the pool of the PEM certificates in pem.
func caPool(pem []byte) (*x509.CertPool, error) {
	caPools.Lock()
	pool, ok := caPools.m[string(pem)]
	caPools.Unlock()
	if ok {
		return pool, nil
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("client: no CA certificate found in Config.CACert")
	}
	caPools.Lock()
	if caPools.m == nil {
		caPools.m = map[string]*x509.CertPool{}
	}
	if len(caPools.m) < maxCAPools {
		caPools.m[string(pem)] = pool
	}
	caPools.Unlock()
	return pool, nil
}

// defaultSessions is the session cache of Configs without their own:
// room for the sessions of a few hundred servers (one per address and
// CA, about 1 KiB each).
var defaultSessions = tls.NewLRUClientSessionCache(256)

// sessionCache is cfg's session cache, keyed apart by address and CA; nil
// with NoSessionCache.
func sessionCache(cfg Config) tls.ClientSessionCache {
	if cfg.NoSessionCache {
		return nil
	}
	c := cfg.SessionCache
	if c == nil {
		c = defaultSessions
	}
	sum := sha256.Sum256(cfg.CACert)
	return &keyedSessions{prefix: cfg.Addr + " " + hex.EncodeToString(sum[:8]) + " ", c: c}
}

// keyedSessions keeps the sessions of one address and CA apart in a
// shared cache: crypto/tls keys sessions by server name alone, and every
// Juju controller's is juju-apiserver; a resumed session is not checked
// against RootCAs again.
type keyedSessions struct {
	prefix string
	c      tls.ClientSessionCache
}

func (k *keyedSessions) Get(key string) (*tls.ClientSessionState, bool) {
	return k.c.Get(k.prefix + key)
}

func (k *keyedSessions) Put(key string, cs *tls.ClientSessionState) { k.c.Put(k.prefix+key, cs) }

// ConnectionState is the TLS state of the connection (DidResume says
// whether its handshake resumed a session).
func (c *Conn) ConnectionState() tls.ConnectionState {
	if w, ok := c.ws.NetConn().(*wireConn); ok {
		return w.ConnectionState()
	}
	return tls.ConnectionState{}
}

// Call invokes facade.method (facade version, object id) with args as
// params (omitted when nil) and decodes the reply's response into result
// when result is non-nil. An error reply is returned as *params.Error.
func (c *Conn) Call(ctx context.Context, facade string, version int, id, method string, args, result any) error {
	_, err := c.call(ctx, request{Type: facade, Version: version, ID: id, Request: method, Params: args}, result)
	return err
}

// CallFrom is Call with provisiond's own header key "from-revision",
// which only provisiond's clients send (Juju's server does not know it):
// a Watch call opens its watcher resumed after revision from (0: a fresh
// watcher), and the reply to it, or to a Next call on the watcher,
// carries the revision up to which the watcher's events so far cover
// every change, which CallFrom returns (0: the watcher cannot resume;
// see docs/history.md, "Resuming a watch"). A watch asked to resume
// after a revision whose history is no longer kept fails with
// ErrWatcherReset: watch again without one.
func (c *Conn) CallFrom(ctx context.Context, facade string, version int, id, method string, from uint64, args, result any) (rev uint64, err error) {
	return c.call(ctx, request{Type: facade, Version: version, ID: id, Request: method, Params: args, FromRevision: &from}, result)
}

func (c *Conn) call(ctx context.Context, req request, result any) (uint64, error) {
	facade, method := req.Type, req.Request
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	reqID := c.lastID.Add(1)
	req.RequestID = reqID
	data, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("client: encoding %s.%s params: %w", facade, method, err)
	}

	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.pending[reqID] = pendingCall{ch: ch}
	c.mu.Unlock()

	if err := c.write(data); err != nil {
		c.forget(reqID)
		return 0, err
	}

	select {
	case r := <-ch:
		return r.revision, c.finish(facade, method, r, result)
	case <-ctx.Done():
		c.forget(reqID)
		return 0, ctx.Err()
	case <-c.done:
		select {
		case r := <-ch: // the reply beat the end of the connection
			return r.revision, c.finish(facade, method, r, result)
		default:
			return 0, c.Err()
		}
	}
}

// Go starts the call Call would make and returns without waiting for
// its reply. done is called exactly once with what Call would have
// returned: from the connection's reader goroutine when the reply arrives
// (result decoded first), or from the goroutine that ends the connection
// (an error wrapping ErrConnClosed), or from Go itself when the call
// cannot be sent. done runs on the reader, so it must be quick and must
// not call Call, Close or anything else that waits for the reader; it may call
// Go (to chain calls, as a watcher's next Next). There is no context: a
// call started by Go ends with its reply or with the connection.
//
// Go saves a goroutine per outstanding call (Call parks its caller), which
// matters to a process driving thousands of watchers (provisionbench).
func (c *Conn) Go(facade string, version int, id, method string, args, result any, done func(error)) {
	c.goRequest(request{Type: facade, Version: version, ID: id, Request: method, Params: args}, result,
		func(_ uint64, err error) { done(err) })
}

// GoFrom is Go with provisiond's "from-revision" header key (CallFrom):
// done also gets the reply's revision (0: none reported).
func (c *Conn) GoFrom(facade string, version int, id, method string, from uint64, args, result any, done func(rev uint64, err error)) {
	c.goRequest(request{Type: facade, Version: version, ID: id, Request: method, Params: args, FromRevision: &from}, result, done)
}

// goRequest sends req and calls done with its reply's revision and
// error, as Go says.
func (c *Conn) goRequest(req request, result any, done func(uint64, error)) {
	facade, method := req.Type, req.Request
	reqID := c.lastID.Add(1)
	req.RequestID = reqID
	data, err := json.Marshal(req)
	if err != nil {
		done(0, fmt.Errorf("client: encoding %s.%s params: %w", facade, method, err))
		return
	}
	c.mu.Lock()
	if c.pending == nil {
		err := c.err
		c.mu.Unlock()
		done(0, err)
		return
	}
	c.pending[reqID] = pendingCall{done: func(r reply, err error) {
		if err == nil {
			err = c.finish(facade, method, r, result)
		}
		if err != nil {
			done(0, err)
			return
		}
		done(r.revision, nil)
	}}
	c.mu.Unlock()
	if err := c.write(data); err != nil {
		// The write ended the connection; done runs once, from whichever
		// of terminate and this finds the call still pending.
		if c.take(reqID) {
			done(0, err)
		}
	}
}

// take removes pending call reqID and reports whether it was pending.
func (c *Conn) take(reqID uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[reqID]; ok {
		delete(c.pending, reqID)
		return true
	}
	return false
}

func (c *Conn) finish(facade, method string, r reply, result any) error {
	if r.err != nil {
		return r.err
	}
	if result != nil && len(r.response) > 0 {
		if err := json.Unmarshal(r.response, result); err != nil {
			return fmt.Errorf("client: decoding %s.%s response: %w", facade, method, err)
		}
	}
	return nil
}

func (c *Conn) forget(reqID uint64) {
	c.mu.Lock()
	if c.pending != nil {
		delete(c.pending, reqID)
	}
	c.mu.Unlock()
}

// write sends one text message. A failed write breaks the connection (gorilla
// connections are unusable after a write error).
func (c *Conn) write(data []byte) error {
	if c.cfg.Trace != nil {
		c.cfg.Trace(true, data)
	}
	c.writeMu.Lock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	err := c.ws.WriteMessage(websocket.TextMessage, data)
	c.writeMu.Unlock()
	if err == nil {
		return nil
	}
	c.abort(fmt.Errorf("write: %w", err), abnormalCode, "")
	return c.Err()
}

// readLoop is the connection's only reader.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer close(c.readerDone)
	defer c.ws.Close()
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.terminate(fmt.Errorf("read: %w", err), closeCodeOf(err))
			return
		}
		if c.cfg.Trace != nil {
			c.cfg.Trace(false, data)
		}
		// What the completions write goes out when the reader next
		// reads (wireConn).
		if w, ok := c.ws.NetConn().(*wireConn); ok {
			w.cork()
		}
		if err := c.dispatch(data); err != nil {
			c.abort(err, websocket.CloseProtocolError, badMsgReason)
			return
		}
	}
}

func closeCodeOf(err error) int {
	var ce *websocket.CloseError
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case errors.Is(err, websocket.ErrReadLimit):
		return websocket.CloseMessageTooBig // gorilla has sent it to the peer
	default:
		return abnormalCode
	}
}

// dispatch hands one message to its pending call. Only an undecodable
// message is an error (it ends the connection, as in Juju's client);
// messages that match no pending call are logged and dropped.
func (c *Conn) dispatch(data []byte) error {
	var h header
	// Decode only the first JSON value, as gorilla's ReadJSON does.
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&h); err != nil {
		return fmt.Errorf("%s: %w", badMsgReason, err)
	}
	if h.Type != "" || h.Request != "" {
		c.log.Warn("rpc client: dropping request from server", "msg", truncate(data))
		return nil
	}
	id := h.RequestID
	if id == 0 {
		id = h.RequestIDV0
	}
	var r reply
	if h.Error != nil {
		var msg string
		if err := json.Unmarshal(h.Error, &msg); err != nil {
			msg = string(h.Error) // not a string: keep the raw JSON as the message
		}
		code := h.ErrorCode
		if code == "" {
			code = h.ErrorCodeV0
		}
		r.err = &params.Error{Message: msg, Code: code, Info: h.ErrorInfo}
	} else {
		r.response, r.revision = h.Response, h.Revision
	}

	c.mu.Lock()
	p, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if !ok {
		c.log.Debug("rpc client: dropping unmatched reply", "request-id", id, "msg", truncate(data))
		return nil
	}
	if p.done != nil {
		p.done(r, nil)
		return nil
	}
	p.ch <- r // buffered, and delivered at most once
	return nil
}

func truncate(b []byte) string {
	const max = 512
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// terminate records why the connection ended and fails pending calls (those
// of Call see Done; those of Go have their done run here). It reports
// whether this call was the one that ended it.
func (c *Conn) terminate(cause error, code int) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.err = fmt.Errorf("%w: %w", ErrConnClosed, cause)
	err := c.err
	c.closeCode = code
	pending := c.pending
	c.pending = nil
	close(c.done)
	c.pinger.stopLocked()
	onEnd := c.onEnd
	c.onEnd = nil
	c.mu.Unlock()
	c.log.Debug("rpc client connection ended", "err", cause, "close-code", code)
	for _, p := range pending {
		if p.done != nil {
			p.done(reply{}, err)
		}
	}
	for _, f := range onEnd {
		f()
	}
	return true
}

// OnEnd registers f to run once when the connection ends (Done is
// closed), after its pending calls have failed: on the goroutine that
// ended it (the reader, a failed write's, Close's), or at once on the
// caller's if it already has. f must not block. A process holding
// thousands of connections (provisionbench's agents) reacts to each
// one's end this way without a goroutine waiting on each Done.
func (c *Conn) OnEnd(f func()) {
	c.mu.Lock()
	if c.err == nil {
		c.onEnd = append(c.onEnd, f)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	f()
}

// abort ends the connection from inside (reader, writer, pinger): it sends a
// close frame and closes the socket, which unblocks the reader. It does not
// wait for goroutines.
func (c *Conn) abort(cause error, code int, reason string) {
	if !c.terminate(cause, code) {
		return
	}
	if code != abnormalCode { // 1006 must never be sent (RFC 6455 §7.4.1)
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(closeWait))
	}
	_ = c.ws.Close()
}

// Close sends a close frame with code 1000, waits briefly for the peer's
// close frame, closes the socket and waits for the Conn's goroutines. It is
// idempotent and always returns nil; Err says why the connection ended.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.pinger.stopLocked()
		c.mu.Unlock()
		if c.terminate(errors.New(closedReason), websocket.CloseNormalClosure) {
			err := c.ws.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(closeWait))
			if err == nil {
				t := time.NewTimer(closeWait)
				select {
				case <-c.readerDone:
				case <-t.C:
				}
				t.Stop()
			}
		}
		_ = c.ws.Close()
		c.wg.Wait()
	})
	return nil
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (wrapping ErrConnClosed and, for a
// close frame from the peer, a *websocket.CloseError), or nil while open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// CloseCode returns the WebSocket close code that ended the connection: the
// peer's (e.g. 1009 when the server refused a too-large message), 1009 when
// this client's ReadLimit was exceeded, 1000 after Close, 1002 after an
// undecodable message, 1001 after a failed ping, 1006 when the socket broke
// without a close frame; 0 while open.
func (c *Conn) CloseCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode
}

// LocalAddr and RemoteAddr return the socket's addresses.
func (c *Conn) LocalAddr() net.Addr { return c.ws.LocalAddr() }

// RemoteAddr returns the server's address.
func (c *Conn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

// Ping calls Pinger v1 Ping.
func (c *Conn) Ping(ctx context.Context) error {
	return c.Call(ctx, "Pinger", 1, "", "Ping", nil, nil)
}

// StartPinger starts the Conn's pinger, which calls Ping every interval
// (default 1 min) after the last ping's reply, until the connection ends,
// as Juju's client's heartbeat does. A ping that fails or goes unanswered
// for Config.PingTimeout (30 s) closes the connection (close code 1001).
// No goroutine waits on its behalf: a timer sends each ping (Go), another
// times it, and its reply, on the reader, arms the next. Calling it
// again, or after the connection ended, does nothing.
func (c *Conn) StartPinger(interval time.Duration) {
	if interval <= 0 {
		interval = defaultPing
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || c.err != nil || c.pinger != nil {
		return
	}
	p := &pinger{c: c, interval: interval}
	p.tick = time.AfterFunc(interval, p.ping)
	c.pinger = p
}

// pinger is a Conn's pinger (StartPinger). Its timers are stopped, under
// the Conn's mu, when the connection ends; a timer's function that runs
// anyway finds the connection ended and does nothing. While one runs
// (the ping's write, the timeout's close) it is counted in the Conn's
// wg, so that Close waits for it.
type pinger struct {
	c        *Conn
	interval time.Duration
	tick     *time.Timer // sends the next ping; guarded by c.mu
	timeout  *time.Timer // ends the connection if the ping is not answered; guarded by c.mu
}

// stopLocked stops p's timers, if p is running; c.mu is held.
func (p *pinger) stopLocked() {
	if p == nil {
		return
	}
	p.tick.Stop()
	if p.timeout != nil {
		p.timeout.Stop()
	}
}

// enter reports whether the connection is still open, counting the
// caller, a timer's function, in the Conn's wg if so: Close sets closing
// under mu before it waits, so no Add comes after its Wait.
func (p *pinger) enter() bool {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || c.err != nil {
		return false
	}
	c.wg.Add(1)
	return true
}

// ping sends one Ping, on the tick timer's goroutine, with its timeout
// armed; answered, the reply arms the next (answered).
func (p *pinger) ping() {
	c := p.c
	c.mu.Lock()
	if c.closing || c.err != nil {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1) // as enter does
	// Armed under mu with the check above: an end after it stops it.
	timeout := time.AfterFunc(c.cfg.PingTimeout, p.timedOut)
	p.timeout = timeout
	c.mu.Unlock()
	defer c.wg.Done()
	c.Go("Pinger", 1, "", "Ping", nil, nil, func(err error) { p.answered(timeout, err) })
}

// answered is a ping's completion: the next ping is armed, or the
// connection closed if the ping failed. A ping whose timeout already
// fired has ended the connection there.
func (p *pinger) answered(timeout *time.Timer, err error) {
	if !timeout.Stop() {
		return
	}
	c := p.c
	if err != nil {
		if errors.Is(err, ErrConnClosed) {
			return // already ended; nothing to add
		}
		p.fail(err)
		return
	}
	c.mu.Lock()
	if !c.closing && c.err == nil {
		p.tick.Reset(p.interval)
	}
	c.mu.Unlock()
}

// timedOut ends the connection: its ping went unanswered for
// Config.PingTimeout.
func (p *pinger) timedOut() {
	if !p.enter() {
		return
	}
	defer p.c.wg.Done()
	p.fail(context.DeadlineExceeded)
}

// fail ends the connection because a ping failed with err.
func (p *pinger) fail(err error) {
	p.c.log.Warn("rpc client ping failed; closing connection", "err", err)
	p.c.abort(fmt.Errorf("%w: %w", ErrPingFailed, err), websocket.CloseGoingAway, pingerReason)
}
