package daemon_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// The world of the bad-input table and the authorisation matrix: the
// Provisioner fixture (default IAAS model: machines 0, 0/lxd/0,
// 0/lxd/0/lxd/0, 1, 1/lxd/0) plus
//
//	other   an IAAS model with machines 0, 1, 2 (machine 2 exists only
//	        there); its machine 0 has an agent password
//	k8s     a CAAS model with application gitlab
//	k8s2    a CAAS model with application elsewhere (only there)
//	scratch an empty IAAS model
//	bob     a user with login access only
//
// The daemon's log is captured so tests can check that no handler panicked.
type world struct {
	*provFixture
	logs        *syncBuffer
	other, caas string // model UUIDs
	caas2       string
	scratch     string // an empty IAAS model for calls that may write
}

const (
	otherM0Password = "other-machine-0-password-xyz"
	otherM0Nonce    = "other-nonce-0"
	bobPassword     = "bob-password-0123456789"
)

func newWorld(t *testing.T) *world {
	t.Helper()
	logs := &syncBuffer{}
	f := newProvFixtureWith(t, func(c *daemon.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.MaxWatchers = 1 << 20
		c.MaxWatchersPerEntity = 1 << 20
		c.LoginFailures = 1 << 20 // bad logins are this world's input, not guesses
		c.LoginRateMax = 1 << 20
	})
	w := &world{provFixture: f, logs: logs}
	st := f.St
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	other, err := st.AddModel(t.Context(), "other", state.ModelTypeIAAS, map[string]any{"agent-version": "3.3.0"})
	must(err)
	w.other = other.UUID
	for i := 0; i < 3; i++ {
		p := state.MachineParams{Series: "jammy"}
		if i == 0 {
			p.Password, p.Nonce, p.InstanceID = otherM0Password, otherM0Nonce, "i-other-0"
		}
		_, err := st.AddMachine(t.Context(), other.UUID, p)
		must(err)
	}
	for _, c := range []struct {
		name, app string
		uuid      *string
	}{{"k8s", "gitlab", &w.caas}, {"k8s2", "elsewhere", &w.caas2}} {
		m, err := st.AddModel(t.Context(), c.name, state.ModelTypeCAAS, map[string]any{"agent-version": "3.3.0", "workload-storage": "standard"})
		must(err)
		*c.uuid = m.UUID
		meta := parseMeta(t, strings.Replace(gitlabMeta, "name: gitlab", "name: "+c.app, 1))
		_, err = st.AddCAASApplication(t.Context(), m.UUID, state.CAASApplicationParams{
			Name: c.app, Charm: state.Charm{URL: "ch:" + c.app + "-1", Revision: 1, Meta: meta},
			Scale: 1, PodSpec: "containers: []",
		})
		must(err)
	}
	scratch, err := st.AddModel(t.Context(), "scratch", state.ModelTypeIAAS, nil)
	must(err)
	w.scratch = scratch.UUID
	_, err = st.AddUser(t.Context(), "bob", "Bob", bobPassword, state.AccessLogin)
	must(err)
	return w
}

// noPanics fails the test if a request handler panicked.
func (w *world) noPanics(t *testing.T) {
	t.Helper()
	if l := w.logs.String(); strings.Contains(l, "panic in request handler") {
		i := strings.Index(l, "panic in request handler")
		t.Fatalf("a request handler panicked:\n%s", l[max(0, i-200):min(len(l), i+3000)])
	}
}

// normalise replaces the world's model UUIDs (random per run) by names,
// for golden files.
func (w *world) normalise(s string) string {
	for uuid, name := range map[string]string{w.Model: "<default>", w.other: "<other>", w.caas: "<k8s>", w.caas2: "<k8s2>", w.scratch: "<scratch>",
		w.D.Credentials().ControllerModelUUID: "<controller>", w.D.Credentials().ControllerUUID: "<controller-uuid>"} {
		s = strings.ReplaceAll(s, uuid, name)
	}
	return uuidRE.ReplaceAllString(s, "<uuid>")
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// rawConn is a websocket client that frames requests by hand, so tests
// can send what no well-behaved client would: missing params, wrong
// types, invalid UTF-8. Calls are sequential.
type rawConn struct {
	t  testing.TB
	ws *websocket.Conn
	id uint64
}

func newRawConn(t *testing.T, d *daemon.Daemon, model string) *rawConn {
	t.Helper()
	return &rawConn{t: t, ws: rawDial(t, d, model)}
}

// rawReply is one decoded reply.
type rawReply struct {
	raw      []byte
	err      *params.Error // call-level error, nil on success
	response json.RawMessage
	items    *decodedItems // itemErrors of response, if decodeItems ran
}

type decodedItems struct {
	errs []*params.Error
	ok   bool
}

// decodeItems decodes r's item errors once, for the callers of its
// itemErrors (a huge reply takes a while to decode).
func (r *rawReply) decodeItems() {
	errs, ok := itemErrors(r.response)
	r.items = &decodedItems{errs, ok}
}

// itemErrors is itemErrors(r.response).
func (r rawReply) itemErrors() ([]*params.Error, bool) {
	if r.items != nil {
		return r.items.errs, r.items.ok
	}
	return itemErrors(r.response)
}

// send writes one request; params nil leaves the key out.
func (c *rawConn) send(facade string, version int, id, method string, p []byte) (uint64, error) {
	c.id++
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"request-id":%d,"type":%q,"version":%d,"id":%q,"request":%q`, c.id, facade, version, id, method)
	if p != nil {
		b.WriteString(`,"params":`)
		b.Write(p)
	}
	b.WriteByte('}')
	_ = c.ws.SetWriteDeadline(time.Now().Add(20 * time.Second))
	return c.id, c.ws.WriteMessage(websocket.TextMessage, b.Bytes())
}

// call sends a request and reads its reply.
func (c *rawConn) call(facade string, version int, id, method string, p []byte) (rawReply, error) {
	reqID, err := c.send(facade, version, id, method, p)
	if err != nil {
		return rawReply{}, err
	}
	_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, data, err := c.ws.ReadMessage()
	if err != nil {
		return rawReply{}, err
	}
	var m struct {
		RequestID uint64          `json:"request-id"`
		Error     *string         `json:"error"`
		Code      string          `json:"error-code"`
		Response  json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return rawReply{}, fmt.Errorf("reply %.200q: %v", data, err)
	}
	if m.RequestID != reqID {
		return rawReply{}, fmt.Errorf("reply to request %d; want %d", m.RequestID, reqID)
	}
	if !utf8.Valid(data) {
		return rawReply{}, fmt.Errorf("reply is not valid UTF-8: %.200q", data)
	}
	r := rawReply{raw: data, response: m.Response}
	if m.Error != nil {
		r.err = &params.Error{Message: *m.Error, Code: m.Code}
	}
	return r, nil
}

func (c *rawConn) mustCall(facade string, version int, id, method string, p any) rawReply {
	c.t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		c.t.Fatal(err)
	}
	r, err := c.call(facade, version, id, method, b)
	if err != nil {
		c.t.Fatalf("%s.%s: %v", facade, method, err)
	}
	return r
}

func (c *rawConn) login(req params.LoginRequest) {
	c.t.Helper()
	if r := c.mustCall("Admin", 3, "", "Login", req); r.err != nil {
		c.t.Fatalf("login %s: %v", req.AuthTag, r.err)
	}
}

// alive checks the connection still answers: Ping after login, Admin
// before it.
func (c *rawConn) alive(loggedIn bool) error {
	var r rawReply
	var err error
	if loggedIn {
		r, err = c.call("Pinger", 1, "", "Ping", []byte(`{}`))
	} else {
		r, err = c.call("Admin", 3, "", "RedirectInfo", nil)
		if err == nil && r.err != nil && r.err.Message == "not redirected" {
			r.err = nil
		}
	}
	if err != nil {
		return err
	}
	if r.err != nil {
		return r.err
	}
	return nil
}

// itemErrors lists the error of each item of a bulk result (the first
// array in the response object: "results", "Results", "args"...), or
// ok=false when the response has no such array.
func itemErrors(resp json.RawMessage) (errs []*params.Error, ok bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(resp, &obj) != nil {
		return nil, false
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		// Each item's error under either spelling, and nothing else of
		// it: no map per item (the bad-input test's huge replies have
		// thousands of items, decoded under the race detector).
		var items []struct {
			Lower json.RawMessage `json:"error"`
			Upper json.RawMessage `json:"Error"`
		}
		if json.Unmarshal(obj[k], &items) != nil || items == nil {
			continue
		}
		for _, it := range items {
			e := it.Lower
			if e == nil {
				e = it.Upper
			}
			var pe *params.Error
			if len(e) > 0 && string(e) != "null" {
				var v struct {
					Message string `json:"message"`
					Code    string `json:"code"`
				}
				if err := json.Unmarshal(e, &v); err == nil {
					pe = &params.Error{Message: v.Message, Code: v.Code}
				}
			}
			errs = append(errs, pe)
		}
		return errs, true
	}
	return nil, false
}

func errString(e *params.Error) string {
	if e == nil {
		return "ok"
	}
	return fmt.Sprintf("%q (%s)", e.Message, e.Code)
}

func parseMeta(t *testing.T, meta string) *charm.Meta {
	t.Helper()
	m, err := charm.ParseMeta([]byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	return m
}
