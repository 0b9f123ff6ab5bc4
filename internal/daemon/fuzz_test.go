package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
)

// FuzzMethodParams decodes arbitrary params into every method of the
// registry and runs it, in-process and without the rpc layer's panic
// recovery, as the caller each facade serves (the controller agent; on a
// CAAS model for CAASUnitProvisioner; the admin user for ModelAdmin; no
// login for Admin). Each input runs on a fresh copy of the same state (a
// snapshot of a daemon's, with machines, a CAAS model and an
// application), so no input sees another's writes. No input may panic;
// a call that fails must not move the state revision; every result must
// encode as JSON (else the reply would be "cannot encode reply"); and
// every watcher a call registered answers Next: at once with a pending
// change, or with code "stopped" once the watcher is stopped. The seed
// corpus (for each method: null, {}, wrong types, and params with every
// field filled, as in TestBadInputEverywhere) runs in every `make test`.
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
	m0, err := st.AddMachine(f.Context(), creds.DefaultModelUUID, state.MachineParams{Password: "fuzz-machine-0-password", Nonce: "n", InstanceID: "i-0"})
	must(err)
	for _, p := range []string{m0.ID, m0.ID + "/lxd/0"} {
		_, err := st.AddMachine(f.Context(), creds.DefaultModelUUID, state.MachineParams{ParentID: p, ContainerType: "lxd"})
		must(err)
	}
	caas, err := st.AddModel(f.Context(), "k8s", state.ModelTypeCAAS, map[string]any{"agent-version": "3.3.0", "workload-storage": "standard"})
	must(err)
	m, err := charm.ParseMeta([]byte(gitlabMeta))
	must(err)
	_, err = st.AddCAASApplication(f.Context(), caas.UUID, state.CAASApplicationParams{Name: "gitlab", Scale: 1,
		Charm: state.Charm{URL: "ch:gitlab-1", Revision: 1, Meta: m}})
	must(err)
	var snapshot bytes.Buffer
	_, err = st.Store().(*boltstore.Store).Snapshot(&snapshot, nil)
	must(err)

	def, err := st.Model(f.Context(), creds.DefaultModelUUID)
	must(err)
	ctrl, err := st.Controller(f.Context())
	must(err)
	cm, err := st.Machine(f.Context(), ctrl.ModelUUID, "0")
	must(err)
	admin, err := st.User(f.Context(), "admin")
	must(err)
	controller := facade.Auth{Tag: names.NewMachineTag("0"), Machine: &facade.AgentMachine{Model: cm.Model, ID: cm.ID}, Controller: true}
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
		"MachineUndertaker":   {def, controller},
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
		st, deps := fuzzState(t, snapshot.Bytes(), reg)
		root := facade.NewRootFunc(deps)(rpc.ConnInfo{ModelUUID: c.model.UUID}, nil).(*facade.Session)
		resources := watcher.NewResources(0)
		defer resources.StopAll()
		defer root.Kill()
		callCtx := func(id string) *facade.Context {
			return &facade.Context{Deps: deps, Session: root, Auth: c.auth, Model: &c.model, Resources: resources, ID: id}
		}
		found, err := reg.Find(m.facade, m.version, m.name)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		what := fmt.Sprintf("%s v%d %s(%s)", m.facade, m.version, m.name, data)
		rev := st.Revision()
		res, err := found.Call(ctx, callCtx("1"), json.RawMessage(data))
		if err != nil {
			if got := st.Revision(); got != rev {
				t.Fatalf("%s failed (%v) but moved the revision %d -> %d", what, err, rev, got)
			}
			_ = facade.ServerError(err).Error()
			return
		}
		if l, ok := res.(*rpc.Later); ok {
			// The watchers' Next: the watcher named "1" of this input's
			// resources, if a call made one; none did here.
			res, err = runLater(t, ctx, l, func() { resources.StopAll() })
			if err != nil {
				return
			}
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("%s: result does not encode: %v", what, err)
		}
		// Every watcher the call registered answers Next.
		for i := 1; i <= resources.Len(); i++ {
			id := strconv.Itoa(i)
			r, err := resources.Get(id)
			if err != nil {
				continue
			}
			facadeName := "StringsWatcher"
			if _, ok := r.(*watcher.Notify); ok {
				facadeName = "NotifyWatcher"
			}
			next, err := reg.Find(facadeName, 1, "Next")
			if err != nil {
				t.Fatal(err)
			}
			nres, err := next.Call(ctx, callCtx(id), nil)
			if err != nil {
				t.Fatalf("%s: %s %s.Next: %v", what, facadeName, id, err)
			}
			l, ok := nres.(*rpc.Later)
			if !ok {
				t.Fatalf("%s: %s.Next returned %T, not an rpc.Later", what, facadeName, nres)
			}
			out, err := runLater(t, ctx, l, func() { _ = resources.Stop(id) })
			switch {
			case err == nil:
				if _, merr := json.Marshal(out); merr != nil {
					t.Fatalf("%s: %s %s.Next result does not encode: %v", what, facadeName, id, merr)
				}
			case params.ErrCode(facade.ServerError(err)) != params.CodeStopped:
				t.Fatalf("%s: %s %s.Next after Stop: %v; want code stopped", what, facadeName, id, err)
			}
		}
	})
}

// fuzzState opens a fresh copy of snapshot (a state file) for one input,
// with the dependencies the facades need over it.
func fuzzState(t *testing.T, snapshot []byte, reg *facade.Registry) (*state.State, *facade.Deps) {
	t.Helper()
	path := filepath.Join(t.TempDir(), daemon.DBFile)
	if err := os.WriteFile(path, snapshot, 0o600); err != nil {
		t.Fatal(err)
	}
	hub := watcher.NewHub()
	st, err := statetest.OpenBolt(path, state.Options{Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, &facade.Deps{
		State: st, Hub: hub, Registry: reg, Logger: slog.New(slog.DiscardHandler),
		ServerVersion: daemon.ServerVersion, APIHostPorts: func() [][]params.HostPort { return nil },
		Environ: environ.New(),
	}
}

// runLater starts l and returns its reply. If none has come once l has
// started, stop is called (a waiting Next then replies with its stop
// error); a reply must then come before ctx ends, exactly once.
func runLater(t *testing.T, ctx context.Context, l *rpc.Later, stop func()) (any, error) {
	t.Helper()
	type reply struct {
		res any
		err error
	}
	replies := make(chan reply, 2)
	l.Start(ctx, func(res any, err error) { replies <- reply{res, err} })
	var r reply
	select {
	case r = <-replies:
	default:
		stop()
		select {
		case r = <-replies:
		case <-ctx.Done():
			t.Fatal("a waiting call did not reply once its watcher was stopped")
		}
	}
	select {
	case <-replies:
		t.Fatal("a call replied twice")
	default:
	}
	return r.res, r.err
}
