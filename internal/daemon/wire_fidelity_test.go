package daemon_test

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state"
)

// Regression tests of what Juju's own clients tripped on. Each
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

// Case 1: ContainerConfig (v11) sends UpdateBehavior's keys at
// the top level, so Juju's client fills its embedded pointer.
func TestWireContainerConfigFlatUpdateBehavior(t *testing.T) {
	f := newProvFixture(t)
	if err := f.St.UpdateModelConfig(t.Context(), f.Model, map[string]any{"enable-os-upgrade": false}, nil); err != nil {
		t.Fatal(err)
	}
	a := rawLogin(t, f.D, f.Model, "machine-0", m0Password, m0Nonce)

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

// Case 2: CharmInfo and ApplicationCharmInfo always send
// meta.min-juju-version, "0.0.0" when the charm sets none, in a form
// Juju's version parser accepts.
func TestWireCharmInfoMinJujuVersion(t *testing.T) {
	e := newCAAS(t, nil)
	e.Deploy("gitlab", gitlabMeta, 1, nil)
	e.Deploy("mattermost", "name: mattermost\nmin-juju-version: 3.1.0\n", 1, nil)
	a := rawController(t, e.D, e.Model)

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

// Case 3: the 2015 Provisioner derives series from the
// machine's base in every method that speaks series, and a series given
// the 2015 way is stored as its base.
func TestWireV1SeriesFromBase(t *testing.T) {
	f := newProvFixture(t)
	admin := rawLogin(t, f.D, f.Model, "user-admin", f.D.Credentials().AdminPassword, "")
	want := map[string]string{} // machine tag -> series
	for base, series := range map[string]string{"ubuntu@22.04": "jammy", "ubuntu@20.04": "focal",
		"ubuntu@24.04": "noble", "ubuntu@18.04": "bionic", "centos@7": "centos7"} {
		var res struct{ Machines []string }
		admin.must("ModelAdmin", 1, "AddMachines", map[string]any{"base": base}, &res)
		want["machine-"+res.Machines[0]] = series
	}
	// 2015 data: a machine added with a series only keeps it as its base.
	m, err := f.St.AddMachine(t.Context(), f.Model, state.MachineParams{Series: "xenial"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.St.Machine(t.Context(), f.Model, m.ID); err != nil || got.Base.String() != "ubuntu@16.04" || got.Series != "" {
		t.Errorf("a 2015 series is stored as base %q, series %q (%v); want ubuntu@16.04 and no series", got.Base, got.Series, err)
	}
	want[m.Tag().String()] = "xenial"

	ctrl := rawController(t, f.D, f.Model)
	var tags []map[string]string
	for tag := range want {
		tags = append(tags, map[string]string{"Tag": tag})
	}
	var series struct{ Results []struct{ Result string } }
	ctrl.must("Provisioner", 1, "Series", map[string]any{"Entities": tags}, &series)
	var info struct {
		Results []struct{ Result struct{ Series string } }
	}
	ctrl.must("Provisioner", 1, "ProvisioningInfo", map[string]any{"Entities": tags}, &info)
	var v11 struct {
		Results []struct {
			Result struct {
				Base struct{ Name, Channel string }
			}
		}
	}
	ctrl.must("Provisioner", 11, "ProvisioningInfo", map[string]any{"entities": []map[string]string{{"tag": m.Tag().String()}}}, &v11)
	for i, tg := range tags {
		if got := series.Results[i].Result; got != want[tg["Tag"]] {
			t.Errorf("Series(%s) = %q; want %q", tg["Tag"], got, want[tg["Tag"]])
		}
		if got := info.Results[i].Result.Series; got != want[tg["Tag"]] {
			t.Errorf("ProvisioningInfo(%s).Series = %q; want %q", tg["Tag"], got, want[tg["Tag"]])
		}
	}
	if b := v11.Results[0].Result.Base; b.Name != "ubuntu" || b.Channel != "16.04/stable" {
		t.Errorf("v11 base of the 2015 machine = %+v", b)
	}

	// FindTools: a series finds the agent binaries kept by its OS, named
	// with the series (2015 agents read the series out of the version).
	var ft struct {
		List []struct {
			Version, URL string
		}
		Error *struct{ Message string }
	}
	ctrl.must("Provisioner", 1, "FindTools", map[string]any{"Number": "3.3.0", "MajorVersion": 3, "MinorVersion": -1,
		"Series": "jammy", "Arch": "amd64"}, &ft)
	if ft.Error != nil || len(ft.List) != 1 || ft.List[0].Version != "3.3.0-jammy-amd64" ||
		ft.List[0].URL != "https://"+f.D.Addr()+"/environment/"+f.Model+"/tools/3.3.0-jammy-amd64" {
		t.Errorf("FindTools(jammy) = %+v", ft)
	}
	ctrl.must("Provisioner", 1, "FindTools", map[string]any{"MajorVersion": 1, "MinorVersion": -1, "Series": "trusty"}, &ft)
	if ft.Error != nil || len(ft.List) != 1 || ft.List[0].Version != "1.25.0-trusty-amd64" {
		t.Errorf("FindTools(trusty, 1.x) = %+v", ft)
	}

	// Tools: machine 0 (base ubuntu@22.04) gets its binaries as jammy.
	agent := rawLogin(t, f.D, f.Model, "machine-0", m0Password, m0Nonce)
	var tools struct {
		Results []struct {
			Tools *struct{ Version string }
			Error *struct{ Message string }
		}
	}
	agent.must("Provisioner", 1, "Tools", map[string]any{"Entities": []map[string]string{{"Tag": "machine-0"}}}, &tools)
	if len(tools.Results) != 1 || tools.Results[0].Tools == nil || tools.Results[0].Tools.Version != "3.3.0-jammy-amd64" {
		t.Errorf("Tools(machine-0) = %+v", tools)
	}
}

// Case 4: InstanceId says Juju's "machine N not provisioned".
func TestWireInstanceIdNotProvisioned(t *testing.T) {
	f := newProvFixture(t)
	ctrl := rawController(t, f.D, f.Model)
	for _, c := range []struct {
		version int
		args    any
	}{
		{11, map[string]any{"entities": []map[string]string{{"tag": "machine-1"}}}},
		{1, map[string]any{"Entities": []map[string]string{{"Tag": "machine-1"}}}},
	} {
		var res struct {
			Results []struct {
				Error struct{ Message, Code string }
			}
		}
		ctrl.must("Provisioner", c.version, "InstanceId", c.args, &res)
		if len(res.Results) != 1 || res.Results[0].Error.Message != "machine 1 not provisioned" ||
			res.Results[0].Error.Code != "not provisioned" {
			t.Errorf("v%d InstanceId(machine-1) = %+v", c.version, res)
		}
	}
}

// pythonLibjujuKnown are the facades provisiond serves that
// python-libjuju 3.x knows (juju/client/facade_versions.py: its client
// facades and its known_unsupported_facades), with the versions it can
// use (nil: any, as for the ones it never calls). A listed name outside
// it logs "unexpected facade X received from the controller"; a listed
// client facade without a common version logs "unknown common facade
// version".
var pythonLibjujuKnown = map[string][]int{
	"Pinger":              {1},
	"NotifyWatcher":       nil,
	"StringsWatcher":      nil,
	"Provisioner":         nil,
	"CAASUnitProvisioner": nil,
	"MachineUndertaker":   nil,
}

// Case 5: a python-libjuju connection, user or agent, logs no
// warning: the login result lists no Admin (as Juju) and no ModelAdmin
// (provisiond's own), and a superuser still reaches ModelAdmin.
func TestWireLoginFacadesPythonLibjuju(t *testing.T) {
	f := newProvFixture(t)
	creds := f.D.Credentials()
	caas, err := f.St.AddModel(t.Context(), "k8s", state.ModelTypeCAAS, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who, model, tag, password, nonce string
	}{
		{"user on a model", f.Model, "user-admin", creds.AdminPassword, ""},
		{"user on /api", "", "user-admin", creds.AdminPassword, ""},
		{"machine agent", f.Model, "machine-0", m0Password, m0Nonce},
		{"controller agent", f.Model, creds.ControllerAgent.Tag, creds.ControllerAgent.Password, creds.ControllerAgent.Nonce},
		{"controller agent on caas", caas.UUID, creds.ControllerAgent.Tag, creds.ControllerAgent.Password, creds.ControllerAgent.Nonce},
	} {
		t.Run(c.who, func(t *testing.T) {
			a := &rawAgent{t: t, ws: rawDial(t, f.D, c.model)}
			login := map[string]any{"auth-tag": c.tag, "credentials": c.password, "client-version": "3.5.2.0"}
			if c.nonce != "" {
				login["nonce"] = c.nonce
			}
			var res struct {
				Facades []struct {
					Name     string `json:"name"`
					Versions []int  `json:"versions"`
				} `json:"facades"`
			}
			a.must("Admin", 3, "Login", login, &res)
			if len(res.Facades) == 0 {
				t.Fatal("login result lists no facades")
			}
			for _, fv := range res.Facades {
				versions, known := pythonLibjujuKnown[fv.Name]
				switch {
				case !known:
					t.Errorf("lists %s: python-libjuju logs \"unexpected facade %s received from the controller\"", fv.Name, fv.Name)
				case versions != nil && !slices.ContainsFunc(fv.Versions, func(v int) bool { return slices.Contains(versions, v) }):
					t.Errorf("lists %s %v: python-libjuju knows only %v", fv.Name, fv.Versions, versions)
				}
			}
			if c.tag == "user-admin" {
				var models struct {
					Models []struct{ Name string } `json:"models"`
				}
				a.must("ModelAdmin", 1, "ListModels", nil, &models)
				if len(models.Models) < 2 {
					t.Errorf("ModelAdmin.ListModels = %+v", models)
				}
			}
		})
	}
}

// Case 6: controller-config api-port is the port the daemon
// listens on (the tests listen on 127.0.0.1:0).
func TestWireAPIPort(t *testing.T) {
	f := newProvFixture(t)
	_, port, _ := net.SplitHostPort(f.D.Addr())
	admin := rawLogin(t, f.D, "", "user-admin", f.D.Credentials().AdminPassword, "")
	ctrl := rawController(t, f.D, f.Model)
	for who, m := range map[string]map[string]any{
		"ModelAdmin.ControllerConfig":  admin.must("ModelAdmin", 1, "ControllerConfig", nil, nil),
		"Provisioner.ControllerConfig": ctrl.must("Provisioner", 11, "ControllerConfig", nil, nil),
	} {
		cfg, _ := m["config"].(map[string]any)
		if got := fmt.Sprint(cfg["api-port"]); got != port || port == "0" {
			t.Errorf("%s api-port = %v; want %s", who, cfg["api-port"], port)
		}
	}
}

// CharmInfo's meta.assumes-expr is the assumes block as Juju's
// ExpressionTree marshals it (the expression list), absent without one.
func TestWireCharmInfoAssumes(t *testing.T) {
	e := newCAAS(t, nil)
	e.Deploy("gitlab", gitlabMeta, 1, nil)
	e.Deploy("mattermost", "name: mattermost\nassumes:\n  - k8s-api\n  - any-of:\n      - juju >= 3.1\n      - juju < 3\n", 1, nil)
	a := rawController(t, e.D, e.Model)
	var ch struct {
		Meta    map[string]json.RawMessage `json:"meta"`
		Metrics json.RawMessage            `json:"metrics"`
	}
	a.must("CAASUnitProvisioner", 2, "CharmInfo", map[string]string{"url": "ch:mattermost-1"}, &ch)
	var expr []any // what Juju's ExpressionTree.UnmarshalJSON decodes
	if err := json.Unmarshal(ch.Meta["assumes-expr"], &expr); err != nil {
		t.Fatalf("assumes-expr %s is not an expression list: %v", ch.Meta["assumes-expr"], err)
	}
	if b, _ := json.Marshal(expr); string(b) != `["k8s-api",{"any-of":["juju \u003e= 3.1","juju \u003c 3"]}]` {
		t.Errorf("assumes-expr = %s", b)
	}
	ch.Meta = nil
	a.must("CAASUnitProvisioner", 2, "CharmInfo", map[string]string{"url": "ch:gitlab-1"}, &ch)
	if raw, ok := ch.Meta["assumes-expr"]; ok {
		t.Errorf("a charm without assumes sends assumes-expr %s", raw)
	}
	if ch.Metrics != nil { // Juju omits metrics for a charm without metrics.yaml
		t.Errorf("CharmInfo sends metrics %s", ch.Metrics)
	}
}

// Audit: a machine added without a base is provisioned with the model's
// default-base, else Juju's default LTS, never an empty base (Juju's
// client parses it) or an empty 2015 series.
func TestWireDefaultBase(t *testing.T) {
	f := newProvFixture(t)
	m, err := f.St.AddMachine(t.Context(), f.Model, state.MachineParams{})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := rawController(t, f.D, f.Model)
	check := func(wantName, wantChannel, wantSeries string) {
		t.Helper()
		var v11 struct {
			Results []struct {
				Result struct {
					Base struct{ Name, Channel string }
				}
			}
		}
		ctrl.must("Provisioner", 11, "ProvisioningInfo", map[string]any{"entities": []map[string]string{{"tag": m.Tag().String()}}}, &v11)
		if b := v11.Results[0].Result.Base; b.Name != wantName || b.Channel != wantChannel {
			t.Errorf("v11 base = %+v; want %s %s", b, wantName, wantChannel)
		}
		var series struct{ Results []struct{ Result string } }
		ctrl.must("Provisioner", 1, "Series", map[string]any{"Entities": []map[string]string{{"Tag": m.Tag().String()}}}, &series)
		if got := series.Results[0].Result; got != wantSeries {
			t.Errorf("v1 series = %q; want %q", got, wantSeries)
		}
	}
	check("ubuntu", "22.04/stable", "jammy")
	if err := f.St.UpdateModelConfig(t.Context(), f.Model, map[string]any{"default-base": "ubuntu@24.04"}, nil); err != nil {
		t.Fatal(err)
	}
	check("ubuntu", "24.04/stable", "noble")
}
