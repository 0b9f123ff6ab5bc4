// Package echo is the baseline server of the transport benchmarks: the same
// transport as the daemon (TLS from package pki, gorilla websocket with the
// rpc server's buffer settings, loopback) answering each request from its
// read loop with its request-id and its params as the response. It is the
// floor of what any server on this transport can do; provisionbench and
// the Go benchmarks in internal/daemon measure the daemon against it.
//
// Serve owns the HTTP server's goroutines; the caller stops them with
// Shutdown or Close on the returned server.
package echo

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/pki"
)

// Handler upgrades each request to a websocket and echoes it.
func Handler() http.Handler {
	up := websocket.Upgrader{
		ReadBufferSize: 0, WriteBufferSize: 4096, WriteBufferPool: &sync.Pool{},
		CheckOrigin: func(*http.Request) bool { return true },
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
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
	})
}

// Serve starts an echo server on 127.0.0.1 (a free port) with TLS
// material kept in dir, and returns it, its listener and the CA
// certificate clients verify it with.
func Serve(dir string) (*http.Server, net.Listener, []byte, error) {
	mat, err := pki.LoadOrCreate(dir, []string{"127.0.0.1"})
	if err != nil {
		return nil, nil, nil, err
	}
	tlsCfg, err := mat.TLSConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	hs := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	go func() { _ = hs.Serve(tls.NewListener(ln, tlsCfg)) }()
	return hs, ln, mat.CACertPEM, nil
}
