// Package echo is the baseline server of the transport benchmarks: the same
// transport as the daemon (TLS from package pki, gorilla websocket with the
// rpc server's buffer sizes and write buffer pool, loopback) answering each
// request from its read loop with its request-id and its params as the
// response. It is the floor of what any server on this transport can do;
// provisionbench and the Go benchmarks in internal/daemon measure the daemon
// against it.
//
// An idle connection holds what one of the rpc server's holds at the
// transport, no more: after the upgrade the handler starts the
// connection's read loop on a goroutine of its own and returns (as
// rpc.Server.ServeHTTP does), so net/http lets go of its 4 KiB reader and
// writer, the request and the handler goroutine whose stack the TLS
// handshake grew; gorilla reads through a buffer of rpc.ReadBufferSize.
//
// Concurrency: the Server owns the HTTP server's goroutines and one
// goroutine per websocket connection (its read loop, which also writes the
// replies); Close stops them all and waits for them.
package echo

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/rpc"
)

// Handler upgrades each request to a websocket and echoes it. It tracks
// its connections: Close ends them.
type Handler struct {
	up websocket.Upgrader

	mu     sync.Mutex // guards conns and closed
	conns  map[*websocket.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the connections' read loops
}

// NewHandler returns a handler with the rpc server's transport settings.
func NewHandler() *Handler {
	return &Handler{
		up: websocket.Upgrader{
			ReadBufferSize:  rpc.ReadBufferSize,
			WriteBufferSize: rpc.WriteBufferSize,
			WriteBufferPool: &sync.Pool{},
			CheckOrigin:     func(*http.Request) bool { return true },
		},
		conns: make(map[*websocket.Conn]struct{}),
	}
}

// ServeHTTP upgrades the request and serves the connection on a goroutine
// of its own, returning at once.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		ws.Close()
		return
	}
	h.conns[ws] = struct{}{}
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		serve(ws)
		h.mu.Lock()
		delete(h.conns, ws)
		h.mu.Unlock()
	}()
}

// Close closes every connection, refuses later ones and waits for the
// read loops to return.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	for ws := range h.conns {
		ws.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// Conns returns the number of open websocket connections.
func (h *Handler) Conns() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// serve echoes the requests of ws until a read or write fails, then
// closes it.
func serve(ws *websocket.Conn) {
	defer ws.Close()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var in struct {
			RequestID uint64          `json:"request-id"`
			Params    json.RawMessage `json:"params"`
		}
		if json.Unmarshal(data, &in) != nil {
			return
		}
		if len(in.Params) == 0 {
			in.Params = json.RawMessage(`{}`)
		}
		out, _ := json.Marshal(struct {
			RequestID uint64          `json:"request-id"`
			Response  json.RawMessage `json:"response"`
		}{in.RequestID, in.Params})
		if ws.WriteMessage(websocket.TextMessage, out) != nil {
			return
		}
	}
}

// Server is a running echo server.
type Server struct {
	// Addr is the address it listens on; CACert verifies its certificate
	// (server name 127.0.0.1).
	Addr   string
	CACert []byte

	hs *http.Server
	h  *Handler
	ln net.Listener
	// served is closed when the HTTP server's Serve has returned.
	served chan struct{}
}

// Serve starts an echo server on 127.0.0.1 (a free port) with TLS
// material kept in dir.
func Serve(dir string) (*Server, error) {
	mat, err := pki.LoadOrCreate(dir, []string{"127.0.0.1"})
	if err != nil {
		return nil, err
	}
	tlsCfg, err := mat.TLSConfig()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := NewHandler()
	s := &Server{
		Addr:   ln.Addr().String(),
		CACert: mat.CACertPEM,
		hs:     &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		h:      h,
		ln:     ln,
		served: make(chan struct{}),
	}
	go func() {
		defer close(s.served)
		_ = s.hs.Serve(tls.NewListener(ln, tlsCfg))
	}()
	return s, nil
}

// Conns returns the number of open websocket connections.
func (s *Server) Conns() int { return s.h.Conns() }

// Close stops the server: the listener, the connections still in net/http
// (handshakes, upgrades) and every websocket connection, and waits for
// their goroutines.
func (s *Server) Close() error {
	err := s.hs.Close()
	<-s.served
	s.h.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
