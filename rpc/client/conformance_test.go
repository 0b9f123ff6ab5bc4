package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/provisiond/provisiond/facades/machineundertaker"
	"github.com/provisiond/provisiond/facades/modeladmin"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/schematest"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The typed clients against Juju's facade schema (read in place by
// schematest) and, for ModelAdmin, against the facade provisiond
// registers: every method has a typed method, whose params and result
// types have the schema's keys; and every typed method, called on a live
// daemon, sends and receives the schema's keys.

// typedFacade is a typed client and the facade version it speaks.
type typedFacade struct {
	facade  string
	version int
	typ     reflect.Type
	// extra are exported methods that are not facade methods.
	extra []string
}

var schemaFacades = []typedFacade{
	{client.ProvisionerFacade, client.ProvisionerVersion, reflect.TypeFor[*client.Provisioner](), []string{"Conn", "Machine", "WatchModelMachinesFrom", "WatchForModelConfigChangesFrom", "WatchAPIHostPortsFrom"}},
	{client.CAASUnitProvisionerFacade, client.CAASUnitProvisionerVersion, reflect.TypeFor[*client.CAASUnitProvisioner](), []string{"Conn", "Application"}},
}

var modelAdmin = typedFacade{client.ModelAdminFacade, client.ModelAdminVersion, reflect.TypeFor[*client.ModelAdmin](), []string{"Conn", "WatchModelFrom"}}

// watchWire is the wire result a typed method returning a running watch
// decodes.
var watchWire = map[reflect.Type]reflect.Type{
	reflect.TypeFor[*client.NotifyWatch]():  reflect.TypeFor[params.NotifyWatchResult](),
	reflect.TypeFor[*client.StringsWatch](): reflect.TypeFor[params.StringsWatchResult](),
}

var (
	ctxType = reflect.TypeFor[context.Context]()
	errType = reflect.TypeFor[error]()
)

// signature is a typed method's wire params and result types (nil: none).
type signature struct{ params, result reflect.Type }

// signatureOf reads func(recv, ctx[, P]) (R, error) or (error).
func signatureOf(t *testing.T, m reflect.Method) signature {
	t.Helper()
	ft := m.Type
	var s signature
	if ft.NumIn() < 2 || ft.In(1) != ctxType || ft.NumIn() > 3 {
		t.Fatalf("%s: want (ctx context.Context[, params]); have %v", m.Name, ft)
	}
	if ft.NumIn() == 3 {
		s.params = ft.In(2)
	}
	switch {
	case ft.NumOut() == 1 && ft.Out(0) == errType:
	case ft.NumOut() == 2 && ft.Out(1) == errType:
		s.result = ft.Out(0)
		if w, ok := watchWire[s.result]; ok {
			s.result = w
		}
	default:
		t.Fatalf("%s: want (result, error) or (error); have %v", m.Name, ft)
	}
	return s
}

func TestTypedClientsMatchTheSchema(t *testing.T) {
	s := schematest.Open(t)
	for _, f := range schemaFacades {
		t.Run(f.facade, func(t *testing.T) {
			want := s.Methods(f.facade, f.version)
			if len(want) == 0 {
				t.Fatalf("the schema has no %s v%d", f.facade, f.version)
			}
			for _, name := range want {
				m, ok := f.typ.MethodByName(name)
				if !ok {
					t.Errorf("%v has no method %s (schema %s v%d)", f.typ, name, f.facade, f.version)
					continue
				}
				sig := signatureOf(t, m)
				_, pdef, _ := s.ParamsKeys(f.facade, f.version, name)
				_, rdef, _ := s.ResultKeys(f.facade, f.version, name)
				k := schematest.KeyCheck{T: t, S: s, Facade: f.facade, Version: f.version}
				for _, c := range []struct {
					what string
					goT  reflect.Type
					def  string
				}{{"params", sig.params, pdef}, {"result", sig.result, rdef}} {
					switch {
					case c.goT == nil && c.def == "":
					case c.goT == nil:
						t.Errorf("%s %s: the schema has %s; the typed method has none", name, c.what, c.def)
					case c.def == "":
						t.Errorf("%s %s: the typed method has %v; the schema has none", name, c.what, c.goT)
					default:
						k.Value(name+" "+c.what+"("+c.goT.String()+")", c.def, schematest.PopulatedValue(c.goT).Interface())
					}
				}
			}
			for i := range f.typ.NumMethod() {
				name := f.typ.Method(i).Name
				if !slices.Contains(want, name) && !slices.Contains(f.extra, name) {
					t.Errorf("%v.%s is not a method of schema %s v%d", f.typ, name, f.facade, f.version)
				}
			}
		})
	}
	// The watcher facades: NotifyWatcher and StringsWatcher drive them by
	// id (their wire is checked by TestTypedClientsRoundTrip).
	for _, w := range []struct {
		facade string
		typ    reflect.Type
	}{{"NotifyWatcher", reflect.TypeFor[*client.NotifyWatcher]()}, {"StringsWatcher", reflect.TypeFor[*client.StringsWatcher]()}} {
		for _, name := range s.Methods(w.facade, 1) {
			if _, ok := w.typ.MethodByName(name); !ok {
				t.Errorf("%v has no method %s (schema %s v1)", w.typ, name, w.facade)
			}
		}
	}
}

// ownFacades are the facades the schema does not have (ModelAdmin,
// provisiond's own; MachineUndertaker, which the Juju 3.3 schema leaves
// out), with the facade's implementation type.
var ownFacades = []struct {
	typedFacade
	impl reflect.Type
}{
	{modelAdmin, reflect.TypeFor[*modeladmin.ModelAdmin]()},
	{typedFacade{client.MachineUndertakerFacade, client.MachineUndertakerVersion, reflect.TypeFor[*client.MachineUndertaker](), []string{"Conn"}},
		reflect.TypeFor[*machineundertaker.API]()},
}

// A facade without a schema: its typed client has exactly the registered
// methods, with the facade's own params and result types.
func TestOwnFacadeClientsMatchTheFacades(t *testing.T) {
	reg := daemon.NewRegistry(nil)
	for _, f := range ownFacades {
		t.Run(f.facade, func(t *testing.T) {
			want := reg.MethodNames(f.facade, f.version)
			if len(want) == 0 {
				t.Fatalf("%s is not registered", f.facade)
			}
			for _, name := range want {
				m, ok := f.typ.MethodByName(name)
				if !ok {
					t.Errorf("%v has no method %s: add it to rpc/client", f.typ, name)
					continue
				}
				sig := signatureOf(t, m)
				if got, want := sig.params, reg.ParamsType(f.facade, f.version, name); got != want {
					t.Errorf("%s params: the typed method sends %v; the facade decodes %v", name, got, want)
				}
				fm, ok := f.impl.MethodByName(name)
				if !ok {
					t.Errorf("%v has no method %s", f.impl, name)
					continue
				}
				var result reflect.Type // nil: the facade returns only an error
				if fm.Type.NumOut() == 2 {
					result = fm.Type.Out(0)
				}
				if sig.result != result {
					t.Errorf("%s result: the typed method decodes %v; the facade returns %v", name, sig.result, result)
				}
			}
			for i := range f.typ.NumMethod() {
				name := f.typ.Method(i).Name
				if !slices.Contains(want, name) && !slices.Contains(f.extra, name) {
					t.Errorf("%v.%s is not a registered %s method", f.typ, name, f.facade)
				}
			}
		})
	}
}

// wireLog records a connection's messages by request id.
type wireLog struct {
	mu      sync.Mutex
	sent    map[uint64]json.RawMessage // request-id → whole request
	replies map[uint64]json.RawMessage // request-id → whole reply
	ids     map[string][]uint64        // "Facade.Method" → its request-ids, in order
}

func newWireLog() *wireLog {
	return &wireLog{sent: map[uint64]json.RawMessage{}, replies: map[uint64]json.RawMessage{}, ids: map[string][]uint64{}}
}

func (l *wireLog) trace(sent bool, msg []byte) {
	var h struct {
		ID      uint64 `json:"request-id"`
		Type    string `json:"type"`
		Request string `json:"request"`
	}
	if json.Unmarshal(msg, &h) != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if sent {
		l.sent[h.ID] = bytes.Clone(msg)
		l.ids[h.Type+"."+h.Request] = append(l.ids[h.Type+"."+h.Request], h.ID)
	} else {
		l.replies[h.ID] = bytes.Clone(msg)
	}
}

// exchange is one call as the wire carried it.
type exchange struct {
	params   json.RawMessage // the params sent
	response json.RawMessage // the reply's response; nil for an error reply
	err      string          // the reply's error
}

// exchanges returns the calls of facade.method so far, in order.
func (l *wireLog) exchanges(t *testing.T, facade, method string) []exchange {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []exchange
	for _, id := range l.ids[facade+"."+method] {
		var req struct {
			Params json.RawMessage `json:"params"`
		}
		var rep struct {
			Error    string          `json:"error"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(l.sent[id], &req); err != nil {
			t.Fatal(err)
		}
		if r, ok := l.replies[id]; !ok {
			rep.Error = "(no reply yet)"
		} else if err := json.Unmarshal(r, &rep); err != nil {
			t.Fatal(err)
		}
		out = append(out, exchange{req.Params, rep.Response, rep.Error})
	}
	if len(out) == 0 {
		t.Fatalf("%s.%s was not sent", facade, method)
	}
	return out
}

// last is the last call of facade.method.
func (l *wireLog) last(t *testing.T, facade, method string) exchange {
	t.Helper()
	all := l.exchanges(t, facade, method)
	return all[len(all)-1]
}

// traced dials srv's model with a wire log and logs in with login.
func traced(t *testing.T, srv *provisiondtest.Server, model string, login func(*client.Conn) error) (*client.Conn, *wireLog) {
	t.Helper()
	l := newWireLog()
	c, err := client.DialCredentials(t.Context(), srv.Credentials(), client.Config{ModelUUID: model, Trace: l.trace})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := login(c); err != nil {
		t.Fatal(err)
	}
	return c, l
}

// destructive methods are called with populated (invalid) params only,
// not on the fixture's entities.
var destructive = []string{"EnsureDead", "Remove", "MarkMachinesForRemoval", "ClearApplicationsResources", "ReleaseContainerAddresses",
	"CompleteMachineRemovals"}

func TestTypedClientsRoundTrip(t *testing.T) {
	s := schematest.Open(t)
	srv := provisiondtest.Start(t)
	ctx := t.Context()
	creds := srv.Credentials()
	model := srv.DefaultModel()
	m0 := srv.ProvisionMachine(t, model, "0")
	srv.ProvisionMachine(t, model, "0/lxd/0")
	admin := client.NewModelAdmin(srv.Admin(t, model))
	k8s := srv.CAASModel(t, "k8s", provisiondtest.CAASApp{Name: "gitlab", Scale: 1})
	asController := func(c *client.Conn) error { _, err := c.LoginControllerAgent(ctx, creds); return err }
	asMachine0 := func(c *client.Conn) error { _, err := c.LoginAgent(ctx, m0.Tag, m0.Password, m0.Nonce); return err }

	// Each facade is called by the agents that use it, with populated
	// (invalid) params and with params naming the fixture's entities.
	type caller struct {
		login func(*client.Conn) error
		real  map[reflect.Type]any // params naming real entities, by type
	}
	for _, f := range []struct {
		typedFacade
		model   string
		callers []caller
		new     func(*client.Conn) any
	}{
		{schemaFacades[0], model, []caller{
			{asController, map[reflect.Type]any{reflect.TypeFor[params.Entities](): client.Entities("machine-0")}},
			{asMachine0, map[reflect.Type]any{
				reflect.TypeFor[params.Entities](): client.Entities("machine-0-lxd-0"),
				reflect.TypeFor[params.SetMachineNetworkConfig](): params.SetMachineNetworkConfig{Tag: "machine-0",
					Config: []params.NetworkConfig{{InterfaceName: "eth0", MACAddress: "00:16:3e:00:00:01", CIDR: "10.0.0.0/24",
						ConfigType: "static", Address: "10.0.0.5", InterfaceType: "ethernet"}}},
			}},
		}, func(c *client.Conn) any { return client.NewProvisioner(c) }},
		{schemaFacades[1], k8s, []caller{
			{asController, map[reflect.Type]any{
				reflect.TypeFor[params.Entities](): client.Entities("application-gitlab"),
				reflect.TypeFor[params.Entity]():   params.Entity{Tag: "application-gitlab"},
				reflect.TypeFor[params.CharmURL](): params.CharmURL{URL: "local:gitlab-0"},
			}},
		}, func(c *client.Conn) any { return client.NewCAASUnitProvisioner(c) }},
	} {
		t.Run(f.facade, func(t *testing.T) {
			answered := map[string]bool{}
			methods := s.Methods(f.facade, f.version)
			for _, who := range f.callers {
				c, log := traced(t, srv, f.model, who.login)
				typed := reflect.ValueOf(f.new(c))
				for _, name := range methods {
					m, ok := f.typ.MethodByName(name)
					if !ok {
						continue // TestTypedClientsMatchTheSchema reports it
					}
					sig := signatureOf(t, m)
					for i, args := range callsOf(name, sig, who.real[sig.params]) {
						out := m.Func.Call(append([]reflect.Value{typed, reflect.ValueOf(ctx)}, args...))
						stopWatch(t, out[0])
						if checkExchange(t, s, f.facade, f.version, name, log.last(t, f.facade, name), i == 0) {
							answered[name] = true
						}
					}
				}
			}
			var unanswered []string
			for _, name := range methods {
				if !answered[name] {
					unanswered = append(unanswered, name)
				}
			}
			// A method whose every call failed had only its params
			// checked: give its caller real params.
			if len(unanswered) > 0 {
				t.Errorf("%d of %d methods never answered without an error: %v", len(unanswered), len(methods), unanswered)
			}
		})
	}

	t.Run("watchers", func(t *testing.T) {
		c, log := traced(t, srv, model, asController)
		p := client.NewProvisioner(c)
		mw, err := p.WatchModelMachines(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cw, err := p.WatchForModelConfigChanges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		provisiondtest.Next(t, mw)
		provisiondtest.Next(t, cw)
		if _, err := admin.AddMachines(ctx, params.AddMachinesArgs{}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.SetModelConfig(ctx, params.SetModelConfigArgs{Config: map[string]any{"logging-config": "<root>=DEBUG"}}); err != nil {
			t.Fatal(err)
		}
		if got := provisiondtest.Next(t, mw); !slices.Equal(got, []string{"1"}) {
			t.Errorf("machines watcher: %v", got)
		}
		provisiondtest.Next(t, cw)
		for _, w := range []interface{ Stop() error }{mw, cw} {
			if err := w.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		for _, facade := range []string{"StringsWatcher", "NotifyWatcher"} {
			nexts := log.exchanges(t, facade, "Next")
			// The last Next is the one Stop ended (or abandoned).
			for i, x := range nexts[:len(nexts)-1] {
				if !checkExchange(t, s, facade, 1, "Next", x, true) {
					t.Errorf("%s.Next #%d: %s", facade, i, x.err)
				}
			}
			if x := log.last(t, facade, "Stop"); !checkExchange(t, s, facade, 1, "Stop", x, true) {
				t.Errorf("%s.Stop: %s", facade, x.err)
			}
		}
	})

	// The facades without a schema: what the typed client sends decodes
	// into the facade's params type and what it receives into its result
	// type, both without unknown keys. ModelAdmin's populated params name
	// model "x", which does not exist, and MachineUndertaker's tags that
	// parse as nothing: nothing is changed. MachineUndertaker is called
	// with the model's tag too, so its results are read.
	for _, f := range []struct {
		typedFacade
		model string
		login func(*client.Conn) error
		new   func(*client.Conn) any
		real  any // params naming real entities, sent to every method but CompleteMachineRemovals
	}{
		{modelAdmin, "", func(c *client.Conn) error { _, err := c.LoginAdmin(ctx, creds); return err },
			func(c *client.Conn) any { return client.NewModelAdmin(c) }, nil},
		{ownFacades[1].typedFacade, model, asController,
			func(c *client.Conn) any { return client.NewMachineUndertaker(c) }, client.Entities(client.ModelTag(model))},
	} {
		t.Run(f.facade, func(t *testing.T) {
			c, log := traced(t, srv, f.model, f.login)
			typed := reflect.ValueOf(f.new(c))
			reg := daemon.NewRegistry(nil)
			for _, name := range reg.MethodNames(f.facade, f.version) {
				m, ok := f.typ.MethodByName(name)
				if !ok {
					continue // TestOwnFacadeClientsMatchTheFacades reports it
				}
				sig := signatureOf(t, m)
				for _, args := range callsOf(name, sig, f.real) {
					out := m.Func.Call(append([]reflect.Value{typed, reflect.ValueOf(ctx)}, args...))
					stopWatch(t, out[0])
					x := log.last(t, f.facade, name)
					if sig.params != nil {
						strictDecode(t, name+" sent", x.params, sig.params)
					}
					if x.err == "" && sig.result != nil {
						strictDecode(t, name+" received", x.response, sig.result)
					}
				}
			}
		})
	}
}

// callsOf returns the arguments a round trip calls method name with: none
// when it takes no params; else its populated params and, unless the
// method is destructive, real (params naming real entities) when not nil.
func callsOf(name string, sig signature, real any) [][]reflect.Value {
	if sig.params == nil {
		return [][]reflect.Value{nil}
	}
	calls := [][]reflect.Value{{schematest.PopulatedValue(sig.params)}}
	if real != nil && !slices.Contains(destructive, name) {
		calls = append(calls, []reflect.Value{reflect.ValueOf(real)})
	}
	return calls
}

// checkExchange checks one call's params and response against the schema
// keys of facade version's method and reports whether it was answered
// without an error. populated says the params were made by
// schematest.Populated.
func checkExchange(t *testing.T, s *schematest.Schema, facade string, version int, method string, x exchange, populated bool) bool {
	t.Helper()
	_, pdef, _ := s.ParamsKeys(facade, version, method)
	_, rdef, _ := s.ResultKeys(facade, version, method)
	// Populated params must carry every key; others may leave out what
	// omitempty leaves out.
	k := schematest.KeyCheck{T: t, S: s, Facade: facade, Version: version, Subset: !populated}
	if pdef != "" {
		k.JSON(method+" sent", pdef, x.params)
	} else if len(x.params) != 0 && string(x.params) != "{}" {
		t.Errorf("%s sent params %s; the schema has none", method, x.params)
	}
	if x.err != "" {
		t.Logf("%s(%.200s): error reply %q", method, x.params, x.err)
		return false
	}
	k.Subset = true
	if rdef != "" {
		k.JSON(method+" received", rdef, x.response)
	} else if len(x.response) != 0 && string(x.response) != "{}" {
		t.Errorf("%s received %s; the schema has no result", method, x.response)
	}
	return true
}

func strictDecode(t *testing.T, what string, data []byte, typ reflect.Type) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
		t.Errorf("%s: %s does not decode into %v: %v", what, data, typ, err)
	}
}

// stopWatch stops a running watch a typed method returned.
func stopWatch(t *testing.T, v reflect.Value) {
	t.Helper()
	if w, ok := v.Interface().(interface{ Stop() error }); ok && !v.IsNil() {
		if err := w.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
}
