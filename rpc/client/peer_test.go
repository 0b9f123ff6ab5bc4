package client

// This file holds the in-test remote peer: a TLS WebSocket server that
// implements just enough of the framing (specs/rpc.md §1) to exercise the
// client. It stands in for the real daemon, which integration tests cover.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const testControllerTag = "controller-deadbeef-dead-4bee-8eef-deadbeefdead"

// genCert makes a self-signed CA/server certificate with the DNS SAN
// "juju-apiserver", as Juju's Go clients verify.
func genCert(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "juju-apiserver", Organization: []string{"provisiond test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"juju-apiserver", "localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pemCert
}

type peerReq struct {
	RequestID uint64          `json:"request-id"`
	Type      string          `json:"type"`
	Version   int             `json:"version"`
	ID        string          `json:"id"`
	Request   string          `json:"request"`
	Params    json.RawMessage `json:"params"`
}

type peer struct {
	t     *testing.T
	srv   *httptest.Server
	caPEM []byte

	badModelTag atomic.Bool  // Login answers with a wrong model tag
	blockPings  atomic.Bool  // Pinger.Ping never answers
	serving     atomic.Int32 // connections being served

	held  chan struct{} // one token per request the peer holds unanswered
	pings chan struct{} // one token per Ping answered

	mu      sync.Mutex
	paths   []string
	origins []string
	curves  []tls.CurveID // the key exchange of each connection
	raw     [][]byte      // every request message, in arrival order
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	cert, caPEM := genCert(t)
	p := &peer{t: t, caPEM: caPEM, held: make(chan struct{}, 1024), pings: make(chan struct{}, 1024)}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed-handshake tests are noisy
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

func (p *peer) config(modelUUID string) Config {
	return Config{Addr: p.srv.Listener.Addr().String(), ModelUUID: modelUUID, CACert: p.caPEM, DialTimeout: 10 * time.Second}
}

func (p *peer) requests() []peerReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]peerReq, 0, len(p.raw))
	for _, m := range p.raw {
		var r peerReq
		_ = json.Unmarshal(m, &r)
		out = append(out, r)
	}
	return out
}

func (p *peer) handshake(i int) (path, origin string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paths[i], p.origins[i]
}

func (p *peer) rawRequests() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.raw...)
}

// peerConn is the server side of one connection.
type peerConn struct {
	p       *peer
	ws      *websocket.Conn
	path    string
	wmu     sync.Mutex
	held    []uint64 // Block requests awaiting Release
	gather  []peerReq
	stopped map[string]bool
}

func (pc *peerConn) send(v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	pc.sendRaw(data)
}

func (pc *peerConn) sendRaw(data []byte) {
	pc.wmu.Lock()
	defer pc.wmu.Unlock()
	_ = pc.ws.WriteMessage(websocket.TextMessage, append(data, '\n'))
}

func (pc *peerConn) ok(id uint64, resp any) {
	if resp == nil {
		resp = struct{}{}
	}
	pc.send(map[string]any{"request-id": id, "response": resp})
}

func (pc *peerConn) fail(id uint64, msg, code string, info map[string]any) {
	m := map[string]any{"request-id": id, "error": msg, "response": struct{}{}}
	if code != "" {
		m["error-code"] = code
	}
	if len(info) > 0 {
		m["error-info"] = info
	}
	pc.send(m)
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (p *peer) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.paths = append(p.paths, r.URL.Path)
	p.origins = append(p.origins, r.Header.Get("Origin"))
	p.curves = append(p.curves, r.TLS.CurveID)
	p.mu.Unlock()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	p.serving.Add(1)
	defer p.serving.Add(-1)
	defer ws.Close()
	pc := &peerConn{p: p, ws: ws, path: r.URL.Path, stopped: map[string]bool{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.raw = append(p.raw, data)
		p.mu.Unlock()
		var req peerReq
		if err := json.Unmarshal(data, &req); err != nil {
			return
		}
		if !pc.handle(req, data, &wg) {
			return
		}
	}
}

// handle answers one request; false ends the connection.
func (pc *peerConn) handle(req peerReq, data []byte, wg *sync.WaitGroup) bool {
	p := pc.p
	id := req.RequestID
	switch req.Type + "." + req.Request {
	case "Admin.Login":
		var lr struct {
			AuthTag string `json:"auth-tag"`
		}
		_ = json.Unmarshal(req.Params, &lr)
		if lr.AuthTag == "user-bad" {
			pc.fail(id, "invalid entity name or password", "unauthorized access", nil)
			return true
		}
		res := map[string]any{"controller-tag": testControllerTag, "server-version": "3.3.0",
			"facades": []map[string]any{{"name": "Pinger", "versions": []int{1}}}}
		if uuid, ok := strings.CutPrefix(pc.path, "/model/"); ok {
			res["model-tag"] = "model-" + strings.TrimSuffix(uuid, "/api")
		}
		if p.badModelTag.Load() {
			res["model-tag"] = "model-00000000-0000-4000-8000-000000000000"
		}
		pc.ok(id, res)
	case "Test.Echo": // answer concurrently with the request as the server saw it
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc.ok(id, json.RawMessage(data))
		}()
	case "Test.Gather": // hold until n have arrived, then answer in reverse order
		var a struct{ N int }
		_ = json.Unmarshal(req.Params, &a)
		pc.gather = append(pc.gather, req)
		if len(pc.gather) == a.N {
			for i := len(pc.gather) - 1; i >= 0; i-- {
				pc.ok(pc.gather[i].RequestID, pc.gather[i].Params)
			}
			pc.gather = nil
		}
	case "Test.Fail":
		pc.fail(id, "boom", "not found", map[string]any{"k": "v"})
	case "Test.V0":
		var a struct{ Fail bool }
		_ = json.Unmarshal(req.Params, &a)
		if a.Fail {
			pc.send(map[string]any{"RequestId": id, "Error": "v0 boom", "ErrorCode": "stopped", "Response": struct{}{}})
		} else {
			pc.send(map[string]any{"RequestId": id, "Response": map[string]any{"v0": true}})
		}
	case "Test.Block":
		pc.held = append(pc.held, id)
		p.held <- struct{}{}
	case "Test.Release": // late replies to every held request
		for _, h := range pc.held {
			pc.ok(h, map[string]any{"late": true})
		}
		pc.held = nil
		pc.ok(id, nil)
	case "Test.CloseWith": // close frame with the given code, then hang up
		var a struct{ Code int }
		_ = json.Unmarshal(req.Params, &a)
		pc.wmu.Lock()
		_ = pc.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(a.Code, "test close"), time.Now().Add(time.Second))
		pc.wmu.Unlock()
		return false
	case "Test.Drop": // hang up without a close frame
		_ = pc.ws.NetConn().Close()
		return false
	case "Test.Big":
		var a struct{ Size int }
		_ = json.Unmarshal(req.Params, &a)
		pc.ok(id, map[string]any{"data": strings.Repeat("x", a.Size)})
	case "Test.Garbage":
		pc.sendRaw([]byte("this is not json"))
	case "Test.Unmatched": // a stray reply and a server-side request first, then the answer
		pc.ok(id+1000, map[string]any{"stray": true})
		pc.send(map[string]any{"request-id": 1, "type": "Client", "request": "Hello"})
		pc.ok(id, map[string]any{"ok": true})
	case "Test.ErrorEmptyResponse": // error key present but empty: still a failure
		pc.sendRaw(fmt.Appendf(nil, `{"request-id":%d,"error":"","response":{}}`, id))
	case "Pinger.Ping":
		if p.blockPings.Load() {
			return true
		}
		pc.ok(id, nil)
		p.pings <- struct{}{}
	case "NotifyWatcher.Next", "NotifyWatcher.Stop", "StringsWatcher.Next", "StringsWatcher.Stop":
		want := map[string]string{"NotifyWatcher": "1", "StringsWatcher": "2"}[req.Type]
		switch {
		case req.ID != want || (pc.stopped[req.ID] && req.Request == "Stop"):
			pc.fail(id, "unknown watcher id", "not found", nil)
		case req.Request == "Stop":
			pc.stopped[req.ID] = true
			pc.ok(id, nil)
		case pc.stopped[req.ID]:
			pc.fail(id, "watcher has been stopped", "stopped", nil)
		case req.Type == "StringsWatcher":
			pc.ok(id, map[string]any{"watcher-id": "", "changes": []string{"0", "0/lxd/1"}})
		default:
			pc.ok(id, nil)
		}
	default:
		pc.fail(id, fmt.Sprintf("unknown facade type %q", req.Type), "not implemented", nil)
	}
	return true
}
