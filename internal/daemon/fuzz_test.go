package daemon_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// FuzzMethodParams decodes arbitrary params into every method of the
// registry and runs it, in-process and without the rpc layer's panic
// recovery, as the caller each facade serves (the controller agent; on a
// CAAS model for CAASUnitProvisioner; the admin user for ModelAdmin; no
// login for Admin). No input may panic, and every result must encode as
// JSON (else the reply would be "cannot encode reply"). The seed corpus
// (for each method: null, {}, wrong types, and params with every field
// filled, as in TestBadInputEverywhere) runs in every `make test`.
func FuzzMethodParams(f *testing.F) {
	d := start(f, nil)
	st := d.State()
	creds := d.Credentials()
	reg := buildRegistry()
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	// Some machines and applications for the params to name.
	m0, err := st.AddMachine(creds.DefaultModelUUID, state.MachineParams{Password: "fuzz-machine-0-password", Nonce: "n", InstanceID: "i-0"})
	must(err)
	for _, p := range []string{m0.ID, m0.ID + "/lxd/0"} {
		_, err := st.AddMachine(creds.DefaultModelUUID, state.MachineParams{ParentID: p, ContainerType: "lxd"})
		must(err)
	}
	caas, err := st.AddModel("k8s", state.ModelTypeCAAS, map[string]any{"agent-version": "3.3.0", "workload-storage": "standard"})
	must(err)
	m, err := charm.ParseMeta([]byte(gitlabMeta))
	must(err)
	_, err = st.AddCAASApplication(caas.UUID, state.CAASApplicationParams{Name: "gitlab", Scale: 1,
		Charm: state.Charm{URL: "ch:gitlab-1", Revision: 1, Meta: m}})
	must(err)

	deps := &facade.Deps{
		State: st, Hub: d.Hub(), Registry: reg, Logger: slog.New(slog.DiscardHandler), Now: time.Now,
		ServerVersion: daemon.ServerVersion, APIHostPorts: func() [][]params.HostPort { return nil },
		Environ: d.Environ(),
	}
	def, err := st.Model(creds.DefaultModelUUID)
	must(err)
	ctrl, err := st.Controller()
	must(err)
	cm, err := st.Machine(ctrl.ModelUUID, "0")
	must(err)
	admin, err := st.User("admin")
	must(err)
	controller := facade.Auth{Tag: names.NewMachineTag("0"), Machine: &cm, Controller: true}
	callers := map[string]struct {
		model state.Model
		auth  facade.Auth
	}{
		"Admin":               {def, facade.Auth{}},
		"Pinger":              {def, controller},
		"NotifyWatcher":       {def, controller},
		"StringsWatcher":      {def, controller},
		"Provisioner":         {def, controller},
		"CAASUnitProvisioner": {caas, controller},
		"ModelAdmin":          {def, facade.Auth{Tag: names.NewUserTag("admin"), User: &admin}},
	}

	type method struct {
		facade  string
		version int
		name    string
		pt      reflect.Type
	}
	var methods []method
	for _, fv := range reg.Facades() {
		if _, ok := callers[fv.Name]; !ok {
			f.Fatalf("facade %s has no caller in FuzzMethodParams", fv.Name)
		}
		for _, v := range fv.Versions {
			for _, name := range reg.MethodNames(fv.Name, v) {
				methods = append(methods, method{fv.Name, v, name, reg.ParamsType(fv.Name, v, name)})
			}
		}
	}
	for i, m := range methods {
		seeds := [][]byte{[]byte(`null`), []byte(`{}`), []byte(`"x"`), []byte(`[1]`)}
		if m.pt != nil {
			for _, s := range []string{"machine-" + m0.ID, "machine-0-lxd-0", "application-gitlab", "not a tag!", ""} {
				seeds = append(seeds, mustJSON(filled(m.pt, s, 2)))
			}
		}
		for _, s := range seeds {
			f.Add(uint16(i), s)
		}
	}

	f.Fuzz(func(t *testing.T, which uint16, data []byte) {
		m := methods[int(which)%len(methods)]
		c := callers[m.facade]
		root := facade.NewRootFunc(deps)(rpc.ConnInfo{ModelUUID: c.model.UUID}, nil).(*facade.Session)
		resources := watcher.NewResources(0)
		defer resources.StopAll()
		defer root.Kill()
		fctx := &facade.Context{Deps: deps, Session: root, Auth: c.auth, Model: c.model, Resources: resources, ID: "1"}
		found, err := reg.Find(m.facade, m.version, m.name)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := found.Call(ctx, fctx, json.RawMessage(data))
		if err != nil {
			_ = facade.ServerError(err).Error()
			return
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("%s v%d %s(%s): result does not encode: %v", m.facade, m.version, m.name, data, err)
		}
	})
}
