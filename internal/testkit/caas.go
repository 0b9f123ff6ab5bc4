package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/storage"
)

// GitlabMeta is a Kubernetes charm's metadata with storage, a
// deployment and devices.
const GitlabMeta = `
name: gitlab
summary: GitLab
description: A forge.
storage:
  data:
    type: filesystem
    location: /var/opt/gitlab
deployment:
  type: stateful
  service: loadbalancer
devices:
  gpu:
    type: nvidia.com/gpu
`

// CAASEnv is a daemon with a CAAS model "k8s" and a connection to it as
// the controller agent, for calls to CAASUnitProvisioner v2.
type CAASEnv struct {
	T     *testing.T
	D     *daemon.Daemon
	St    *state.State
	Model string       // k8s's UUID
	C     *client.Conn // the controller agent on k8s
}

// NewCAAS starts a daemon and adds the model with agent-version 3.3.0 and
// workload-storage standard, and cfg over them (a nil value removes a
// key).
func NewCAAS(t *testing.T, cfg map[string]any) *CAASEnv {
	t.Helper()
	d := Start(t, nil)
	base := map[string]any{"agent-version": "3.3.0", "workload-storage": "standard"}
	for k, v := range cfg {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	m, err := d.State().AddModel(t.Context(), "k8s", state.ModelTypeCAAS, base)
	if err != nil {
		t.Fatal(err)
	}
	return &CAASEnv{T: t, D: d, St: d.State(), Model: m.UUID, C: LoginController(t, d, m.UUID)}
}

// Deploy adds application name of the charm meta at scale with storage
// constraints cons, in the state itself.
func (e *CAASEnv) Deploy(name, meta string, scale int, cons map[string]storage.Constraints) {
	e.T.Helper()
	m, err := charm.ParseMeta([]byte(meta))
	if err != nil {
		e.T.Fatal(err)
	}
	_, err = e.St.AddCAASApplication(context.Background(), e.Model, state.CAASApplicationParams{
		Name: name, Charm: state.Charm{URL: "ch:" + m.Name + "-1", Revision: 1, Meta: m,
			Config: map[string]state.CharmOption{"port": {Type: "int", Default: 80.0}}},
		Scale: scale, Storage: cons, PodSpec: "containers: []",
	})
	if err != nil {
		e.T.Fatal(err)
	}
}

// Call calls CAASUnitProvisioner v2's method, decoding into a zeroed res.
func (e *CAASEnv) Call(method string, args, res any) error {
	if res != nil { // a reply decodes into a zero value, not over the last one
		reflect.ValueOf(res).Elem().SetZero()
	}
	return e.C.Call(Ctx(e.T), "CAASUnitProvisioner", 2, "", method, args, res)
}

// MustCall is Call failing the test on a call-level error.
func (e *CAASEnv) MustCall(method string, args, res any) {
	e.T.Helper()
	if err := e.Call(method, args, res); err != nil {
		e.T.Fatalf("%s: %v", method, err)
	}
}

// Update calls UpdateApplicationsUnits with arg and returns its result.
func (e *CAASEnv) Update(arg params.UpdateApplicationUnits) params.UpdateApplicationUnitResult {
	e.T.Helper()
	var res params.UpdateApplicationUnitResults
	e.MustCall("UpdateApplicationsUnits", params.UpdateApplicationUnitArgs{Args: []params.UpdateApplicationUnits{arg}}, &res)
	if len(res.Results) != 1 {
		e.T.Fatalf("results = %+v", res)
	}
	return res.Results[0]
}

// Ptr is a pointer to v.
func Ptr[T any](v T) *T { return &v }

// NextWithin reports whether a notify watcher fires within d.
func NextWithin(t *testing.T, w *client.NotifyWatcher, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(Ctx(t), d)
	defer cancel()
	err := w.Next(ctx)
	if err == nil {
		return true
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next: %v", err)
	}
	return false
}

// WriteModelConfigs writes, in the daemon's store itself, each model's
// config as given (no defaults, no checks: what an older build may have
// left), and the state schema version when it is not "".
func WriteModelConfigs(t *testing.T, d *daemon.Daemon, configs map[string]map[string]any, schema string) {
	t.Helper()
	_, err := d.State().Store().Update(context.Background(), func(tx store.Txn) error {
		for uuid, cfg := range configs {
			key := store.Key("model", uuid)
			b, ok, err := tx.Get(key)
			if err != nil || !ok {
				return fmt.Errorf("model record %s: %v, %v", key, ok, err)
			}
			var rec map[string]any
			if err := json.Unmarshal(b, &rec); err != nil {
				return err
			}
			rec["config"] = cfg
			if b, err = json.Marshal(rec); err != nil {
				return err
			}
			if err := tx.Put(key, b); err != nil {
				return err
			}
		}
		if schema == "" {
			return nil
		}
		return tx.Put(store.Key("schema", "state"), []byte(schema))
	})
	if err != nil {
		t.Fatal(err)
	}
}
