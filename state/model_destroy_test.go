package state_test

import (
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/storage"
)

// DestroyModel: an IAAS model's units go at once, its machines (and what
// they host) become dying, its applications go; the model goes with its
// last machine.
func TestDestroyModelIAAS(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := statetest.AddModel(t, st, "edge", state.ModelTypeIAAS)
	m0 := statetest.AddMachine(t, st, m.UUID, "n0")
	if _, err := st.AddMachine(m.UUID, state.MachineParams{ParentID: m0.ID, ContainerType: "lxd"}); err != nil {
		t.Fatal(err)
	}
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddIAASApplication(m.UUID, state.IAASApplicationParams{Name: "web", Charm: state.Charm{URL: "local:web-0", Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(m.UUID, "web", m0.ID, ""); err != nil {
		t.Fatal(err)
	}

	got, removed, err := st.DestroyModel(m.UUID)
	if err != nil || removed || got.Life != state.Dying {
		t.Fatalf("DestroyModel = %+v, %v, %v", got, removed, err)
	}
	ms, err := st.Machines(m.UUID)
	if err != nil || len(ms) != 2 || ms[0].Life != state.Dying || ms[1].Life != state.Dying {
		t.Fatalf("machines = %+v, %v", ms, err)
	}
	if units, err := st.Units(m.UUID); err != nil || len(units) != 0 {
		t.Errorf("units = %+v, %v", units, err)
	}
	if apps, err := st.Applications(m.UUID); err != nil || len(apps) != 0 {
		t.Errorf("applications = %+v, %v", apps, err)
	}
	// Again: nothing left to do, still dying.
	if _, removed, err := st.DestroyModel(m.UUID); err != nil || removed {
		t.Fatalf("second DestroyModel = %v, %v", removed, err)
	}
	// The agents finish: the container, then its host.
	for _, id := range []string{m0.ID + "/lxd/0", m0.ID} {
		if err := st.EnsureMachineDead(m.UUID, id); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RemoveMachine(m.UUID, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Model(m.UUID); !errors.Is(err, errors.NotFound) {
		t.Errorf("model after its last machine: %v", err)
	}
}

// RemoveApplication takes a dying Kubernetes application with its units;
// their storage stays, detached (and keeps a dying model).
func TestRemoveApplication(t *testing.T) {
	t.Parallel()
	st, model := caasModel(t)
	meta, err := charm.ParseMeta([]byte("name: db\nstorage:\n  data:\n    type: filesystem\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASApplication(model, state.CAASApplicationParams{Name: "db", Charm: state.Charm{URL: "local:db-0", Meta: meta},
		Storage: map[string]storage.Constraints{"data": {Pool: "kubernetes"}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPodSpec(model, "db", "containers: []"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASUnit(model, "db", state.CAASUnitParams{ProviderID: "db-0"}); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveApplication(model, "db"); err == nil || err.Error() != `application "db" is alive` {
		t.Fatalf("alive: %v", err)
	}
	if _, removed, err := st.DestroyModel(model); err != nil || removed {
		t.Fatalf("DestroyModel = %v, %v", removed, err)
	}
	if a, err := st.Application(model, "db"); err != nil || a.Life != state.Dying {
		t.Fatalf("a Kubernetes application waits for its unit provisioner: %+v, %v", a, err)
	}
	if err := st.RemoveApplication(model, "db"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Application(model, "db"); !errors.Is(err, errors.NotFound) {
		t.Errorf("application after removal: %v", err)
	}
	if units, err := st.CAASUnits(model, "db"); err != nil || len(units) != 0 {
		t.Errorf("units = %+v, %v", units, err)
	}
	if _, err := st.K8sSpec(model, "db"); !errors.Is(err, errors.NotFound) {
		t.Errorf("pod spec: %v", err)
	}
	sis, err := st.StorageInstances(model)
	if err != nil || len(sis) != 1 || sis[0].Unit != "" || sis[0].Owner != "" {
		t.Errorf("storage = %+v, %v", sis, err)
	}
	fss, err := st.Filesystems(model)
	if err != nil || len(fss) != 1 || fss[0].Attachment != nil || fss[0].Status.Status != "detached" {
		t.Errorf("filesystems = %+v, %v", fss, err)
	}
	if m, err := st.Model(model); err != nil || m.Life != state.Dying {
		t.Errorf("the storage keeps the model dying: %+v, %v", m, err)
	}
}
