package state_test

import (
	"fmt"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

func TestRemoveModel(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m, err := st.AddModel(t.Context(), "prod", state.ModelTypeCAAS, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := st.WatchModelChanges(t.Context(), m.UUID)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// An empty model goes at once, with its name.
	got, removed, err := st.RemoveModel(t.Context(), m.UUID)
	if err != nil || !removed || got.Life != state.Dead || got.Name != "prod" || got.UUID != m.UUID {
		t.Fatalf("RemoveModel = %+v, %v, %v", got, removed, err)
	}
	watchertest.StringsAssertChange(t, w, "model/"+m.UUID)
	if _, err := st.Model(t.Context(), m.UUID); !errors.Is(err, errors.NotFound) {
		t.Errorf("Model after removal: %v", err)
	}
	if _, err := st.ModelByName(t.Context(), "prod"); !errors.Is(err, errors.NotFound) {
		t.Errorf("ModelByName after removal: %v", err)
	}
	if _, _, err := st.RemoveModel(t.Context(), m.UUID); !errors.Is(err, errors.NotFound) {
		t.Errorf("second RemoveModel: %v", err)
	}
	again, err := st.AddModel(t.Context(), "prod", state.ModelTypeIAAS, nil)
	if err != nil || again.UUID == m.UUID {
		t.Fatalf("re-adding the name: %+v, %v", again, err)
	}

	// A model with entities only becomes dying.
	if _, err := st.AddMachine(t.Context(), again.UUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	got, removed, err = st.RemoveModel(t.Context(), again.UUID)
	if err != nil || removed || got.Life != state.Dying {
		t.Fatalf("RemoveModel of a model with a machine = %+v, %v, %v", got, removed, err)
	}
	if m, err := st.ModelByName(t.Context(), "prod"); err != nil || m.Life != state.Dying {
		t.Fatalf("dying model = %+v, %v", m, err)
	}
	if _, err := st.AddMachine(t.Context(), again.UUID, state.MachineParams{}); !errors.Is(err, errors.NotValid) {
		t.Errorf("AddMachine to a dying model: %v", err)
	}
	if _, err := st.AddModel(t.Context(), "prod", state.ModelTypeIAAS, nil); !errors.Is(err, errors.AlreadyExists) {
		t.Errorf("the dying model's name was free: %v", err)
	}
	rev := st.Revision()
	if got, removed, err := st.RemoveModel(t.Context(), again.UUID); err != nil || removed || got.Life != state.Dying || st.Revision() != rev {
		t.Errorf("RemoveModel of a dying model = %+v, %v, %v (revision %d -> %d)", got, removed, err, rev, st.Revision())
	}

	// The controller model is refused; nothing changes.
	rev = st.Revision()
	if _, _, err := st.RemoveModel(t.Context(), statetest.ControllerModelUUID); !errors.Is(err, errors.Forbidden) ||
		err.Error() != "cannot remove the controller model" {
		t.Errorf("removing the controller model: %v", err)
	}
	if c, err := st.Model(t.Context(), statetest.ControllerModelUUID); err != nil || c.Life != state.Alive || st.Revision() != rev {
		t.Errorf("controller model after refusal: %+v, %v", c, err)
	}
}

func TestWatchModelChanges(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	st := statetest.NewWithOptions(t, statetest.Options{Hub: hub})
	model := statetest.DefaultModelUUID
	w, _, err := st.WatchModelChanges(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 + len(state.ModelKinds) + len(state.ModelRecordKinds); hub.Subscriptions() != want {
		t.Fatalf("Subscriptions = %d, want %d", hub.Subscriptions(), want)
	}
	watchertest.StringsAssertNoChange(t, w) // a change feed: nothing initially

	if err := st.UpdateModelConfig(t.Context(), model, map[string]any{"a": 1}, nil); err != nil {
		t.Fatal(err)
	}
	watchertest.StringsAssertChange(t, w, "model/"+model)
	m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetMachinePassword(t.Context(), model, m.ID, statetest.MachinePassword); err != nil {
		t.Fatal(err)
	}
	watchertest.StringsAssertChange(t, w, "machine/"+m.ID) // two changes, coalesced

	// Other models and controller-wide records are not reported.
	if err := st.UpdateModelConfig(t.Context(), statetest.ControllerModelUUID, map[string]any{"a": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddMachine(t.Context(), statetest.ControllerModelUUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUser(t.Context(), "bob", "", "pw", ""); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateControllerConfig(t.Context(), map[string]any{"x": 1}, nil); err != nil {
		t.Fatal(err)
	}
	watchertest.StringsAssertNoChange(t, w)

	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if hub.Subscriptions() != 0 {
		t.Errorf("Subscriptions after Stop = %d", hub.Subscriptions())
	}
	if _, _, err := st.WatchModelChanges(t.Context(), "nope"); !errors.Is(err, errors.NotFound) {
		t.Errorf("unknown model: %v", err)
	}
	if hub.Subscriptions() != 0 {
		t.Errorf("Subscriptions after a failed watch = %d", hub.Subscriptions())
	}
	if got := state.ChangeID(state.KindMachine, "0/lxd/1"); got != "machine/0/lxd/1" {
		t.Errorf("ChangeID = %q", got)
	}
}

// A model's own records (spaces, pools, constraints...) do not keep it
// when it dies; they go with it.
func TestRemoveModelTakesItsRecords(t *testing.T) {
	st := statetest.New(t)
	m, err := st.AddModel(t.Context(), "net", state.ModelTypeIAAS, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddSpace(t.Context(), m.UUID, "db", "prov-db"); err != nil {
		t.Fatal(err)
	}
	if err := st.AddStoragePool(t.Context(), m.UUID, "fast", "loop", nil); err != nil {
		t.Fatal(err)
	}
	_, removed, err := st.RemoveModel(t.Context(), m.UUID)
	if err != nil || !removed {
		t.Fatalf("RemoveModel = %v, %v; want removed at once", removed, err)
	}
	// A new model of the same name starts without them.
	m2, err := st.AddModel(t.Context(), "net", state.ModelTypeIAAS, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Space(t.Context(), m.UUID, "db"); err == nil {
		t.Error("the removed model's space survived")
	}
	if _, err := st.StoragePool(t.Context(), m.UUID, "fast"); err == nil {
		t.Error("the removed model's pool survived")
	}
	if _, err := st.AddSpace(t.Context(), m2.UUID, "db", "prov-db"); err != nil {
		t.Fatal(err)
	}
}

// Model records are decoded through a cache (record_cache.go): every read
// sees the last write, and a caller's changes to the config it got are
// never seen by the next reader.
func TestModelReadsAreCurrentAndPrivate(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m, err := st.AddModel(t.Context(), "prod", state.ModelTypeIAAS, map[string]any{"k": "v0"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // a record is kept from its second read on
		want := fmt.Sprint("v", i)
		if i > 0 {
			if err := st.UpdateModelConfig(t.Context(), m.UUID, map[string]any{"k": want}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			got, err := st.Model(t.Context(), m.UUID)
			if err != nil || got.Config["k"] != want || got.Name != "prod" || got.Life != state.Alive {
				t.Fatalf("Model after setting k=%s: %+v, %v", want, got, err)
			}
			head, err := st.ModelHead(t.Context(), m.UUID)
			if err != nil || head.UUID != m.UUID || head.Name != "prod" || head.Type != state.ModelTypeIAAS ||
				head.Life != state.Alive || head.Config != nil {
				t.Fatalf("ModelHead after setting k=%s: %+v, %v", want, head, err)
			}
			got.Config["k"] = "scribbled"
			got.Config["new"] = "scribbled"
			byName, err := st.ModelByName(t.Context(), "prod")
			if err != nil || byName.Config["k"] != want || byName.Config["new"] != nil {
				t.Fatalf("ModelByName after a caller's changes: %+v, %v", byName, err)
			}
		}
	}
	// The head (life) of a write the cache saw whole.
	if _, _, err := st.RemoveModel(t.Context(), m.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Model(t.Context(), m.UUID); !errors.Is(err, errors.NotFound) {
		t.Errorf("Model after removal: %v", err)
	}
	if _, err := st.ModelHead(t.Context(), m.UUID); !errors.Is(err, errors.NotFound) {
		t.Errorf("ModelHead after removal: %v", err)
	}
}
