package daemon_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/daemon"
)

// Regression tests of issue 12 (what Juju's own clients tripped on). Each
// reads the reply's bytes off a raw websocket and decodes them as Juju's
// client would (its own types, with its embedded structs), never through
// provisiond's rpc/params types.

// jujuVersionRE is the grammar of Juju's strict version parser
// (version.Parse), which its client applies to versions it reads.
var jujuVersionRE = regexp.MustCompile(`^\d{1,9}\.\d{1,9}(\.|-[a-z]+)\d{1,9}(\.\d{1,9})?$`)

// rawAgent is a raw websocket logged in as tag on model.
type rawAgent struct {
	t  *testing.T
	ws *websocket.Conn
	id int
}

func rawLogin(t *testing.T, d *daemon.Daemon, model, tag, password, nonce string) *rawAgent {
	t.Helper()
	a := &rawAgent{t: t, ws: rawDial(t, d, model)}
	login := map[string]any{"auth-tag": tag, "credentials": password}
	if nonce != "" {
		login["nonce"] = nonce
	}
	if _, err := a.call("Admin", 3, "Login", login); err != nil {
		t.Fatalf("login %s: %v", tag, err)
	}
	return a
}

// rawController is the controller agent on model.
func rawController(t *testing.T, d *daemon.Daemon, model string) *rawAgent {
	c := d.Credentials().ControllerAgent
	return rawLogin(t, d, model, c.Tag, c.Password, c.Nonce)
}

// call sends one request and returns the reply's "response" bytes, or the
// reply's error as an error.
func (a *rawAgent) call(facade string, version int, method string, args any) (json.RawMessage, error) {
	a.t.Helper()
	a.id++
	req, err := json.Marshal(map[string]any{"request-id": a.id, "type": facade, "version": version,
		"request": method, "params": args})
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.ws.WriteMessage(websocket.TextMessage, req); err != nil {
		a.t.Fatal(err)
	}
	_ = a.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, data, err := a.ws.ReadMessage()
	if err != nil {
		a.t.Fatalf("read reply to %s: %v", req, err)
	}
	var reply struct {
		RequestID int             `json:"request-id"`
		Error     string          `json:"error"`
		Code      string          `json:"error-code"`
		Response  json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		a.t.Fatalf("reply %s: %v", data, err)
	}
	if reply.RequestID != a.id {
		a.t.Fatalf("reply %s answers request %d; want %d", data, reply.RequestID, a.id)
	}
	if reply.Error != "" {
		return nil, fmt.Errorf("%s (code %q)", reply.Error, reply.Code)
	}
	return reply.Response, nil
}

// must is call failing the test on an error; it decodes the response
// into out (when not nil) and returns the response as a generic object.
func (a *rawAgent) must(facade string, version int, method string, args, out any) map[string]any {
	a.t.Helper()
	raw, err := a.call(facade, version, method, args)
	if err != nil {
		a.t.Fatalf("%s.%s v%d: %v", facade, method, version, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s.%s v%d: decode %s: %v", facade, method, version, raw, err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		a.t.Fatalf("%s.%s v%d: %s is not an object: %v", facade, method, version, raw, err)
	}
	return m
}

// Juju's params.ContainerConfig embeds *UpdateBehavior (the shape its
// client decodes into); its lxd/kvm brokers dereference the pointer.
// (Exported: encoding/json sets only embedded pointers to exported
// structs.)
type JujuUpdateBehavior struct {
	EnableOSRefreshUpdate bool `json:"enable-os-refresh-update"`
	EnableOSUpgrade       bool `json:"enable-os-upgrade"`
}

type jujuContainerConfig struct {
	ProviderType string `json:"provider-type"`
	*JujuUpdateBehavior
}

// Issue 12, case 1: ContainerConfig (v11) sends UpdateBehavior's keys at
// the top level, so Juju's client fills its embedded pointer.
func TestWireContainerConfigFlatUpdateBehavior(t *testing.T) {
	f := newProvFixture(t)
	if err := f.st.UpdateModelConfig(f.model, map[string]any{"enable-os-upgrade": false}, nil); err != nil {
		t.Fatal(err)
	}
	a := rawLogin(t, f.d, f.model, "machine-0", m0Password, m0Nonce)

	var cc jujuContainerConfig
	m := a.must("Provisioner", 11, "ContainerConfig", nil, &cc)
	if _, nested := m["UpdateBehavior"]; nested {
		t.Errorf("ContainerConfig nests UpdateBehavior: %v", m)
	}
	if m["enable-os-refresh-update"] != true || m["enable-os-upgrade"] != false {
		t.Errorf("enable-os-refresh-update = %v, enable-os-upgrade = %v; want true, false at the top level",
			m["enable-os-refresh-update"], m["enable-os-upgrade"])
	}
	if cc.JujuUpdateBehavior == nil {
		t.Fatal("Juju's client would decode a nil UpdateBehavior")
	}
	if !cc.EnableOSRefreshUpdate || cc.EnableOSUpgrade || cc.ProviderType != "builtin" {
		t.Errorf("decoded as Juju does: %+v %+v", cc, *cc.JujuUpdateBehavior)
	}

	// 2015 shapes were flat already (Go field names as keys).
	m = a.must("Provisioner", 1, "ContainerConfig", nil, nil)
	if m["EnableOSRefreshUpdate"] != true || m["EnableOSUpgrade"] != false {
		t.Errorf("v1 ContainerConfig = %v", m)
	}
}

// Issue 12, case 2: CharmInfo and ApplicationCharmInfo always send
// meta.min-juju-version, "0.0.0" when the charm sets none, in a form
// Juju's version parser accepts.
func TestWireCharmInfoMinJujuVersion(t *testing.T) {
	e := newCAAS(t, nil)
	e.deploy("gitlab", gitlabMeta, 1, nil)
	e.deploy("mattermost", "name: mattermost\nmin-juju-version: 3.1.0\n", 1, nil)
	a := rawController(t, e.d, e.model)

	for _, c := range []struct {
		method string
		args   any
		want   string
	}{
		{"CharmInfo", map[string]string{"url": "ch:gitlab-1"}, "0.0.0"},
		{"ApplicationCharmInfo", map[string]string{"tag": "application-gitlab"}, "0.0.0"},
		{"CharmInfo", map[string]string{"url": "ch:mattermost-1"}, "3.1.0"},
		{"ApplicationCharmInfo", map[string]string{"tag": "application-mattermost"}, "3.1.0"},
	} {
		var ch struct {
			Meta map[string]json.RawMessage `json:"meta"`
		}
		a.must("CAASUnitProvisioner", 2, c.method, c.args, &ch)
		raw, ok := ch.Meta["min-juju-version"]
		if !ok {
			t.Errorf("%s %v: meta has no min-juju-version", c.method, c.args)
			continue
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil || v != c.want || !jujuVersionRE.MatchString(v) {
			t.Errorf("%s %v: min-juju-version = %s; want %q", c.method, c.args, raw, c.want)
		}
	}
}
