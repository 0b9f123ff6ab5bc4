package state_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// The provider id index follows the units' provider ids, tells apart ids
// that hold "\x00", and is built from the units when a store of schema
// version 2 (whose layout of the index differed) opens.
func TestUnitProviderIDIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := statetest.OpenBolt(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Initialize(t.Context(), statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	model := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS).UUID
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"a", "b"} {
		if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: app,
			Charm: state.Charm{URL: "local:web-0", Meta: meta}, Scale: 2}); err != nil {
			t.Fatal(err)
		}
	}
	two := 2
	report := func(app string, ids ...string) {
		t.Helper()
		var pods []state.Pod
		for _, id := range ids {
			pods = append(pods, state.Pod{ProviderID: id, Status: "running"})
		}
		if _, err := st.UpdateCAASUnits(t.Context(), model, app, state.UnitsUpdate{Scale: &two, Pods: pods}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(id string, want ...string) {
		t.Helper()
		got, err := state.UnitsByProviderID(st, model, id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("units with provider id %q: %v, want %v", id, got, want)
		}
	}
	report("a", "p", "p\x00b")
	report("b", "p\x00b", "q")
	check("p", "a/0")
	check("p\x00b", "a/1", "b/0")
	check("q", "b/1")
	check("ghost")

	if err := state.SpoilIndexes(st, model); err != nil {
		t.Fatal(err)
	}
	check("p")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = statetest.OpenBolt(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check("p", "a/0")
	check("p\x00b", "a/1", "b/0")
	check("q", "b/1")
	check("ghost")
	stats, err := st.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stats.StateSchemaVersion != state.SchemaVersion || stats.Records["unit-provider-id"] != 0 || stats.Records["model-name"] != 0 {
		t.Errorf("after the migration: schema %d, old index kinds %d, %d", stats.StateSchemaVersion,
			stats.Records["unit-provider-id"], stats.Records["model-name"])
	}
	if uuids, err := state.ModelsByNameIndex(st, "k8s"); err != nil || !slices.Equal(uuids, []string{model}) {
		t.Errorf("model name index after the migration: %v, %v", uuids, err)
	}
	if uuids, _ := state.ModelsByNameIndex(st, "ghost"); len(uuids) != 0 {
		t.Errorf("the old layout's model name entry came through: %v", uuids)
	}
}

// Units on a machine are read through the index of units by machine, which
// follows assignment and removal in the transaction that writes the unit;
// the machine life cycle's refusals read it.
func TestUnitMachineIndex(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	m0 := statetest.AddMachine(t, st, model, "")
	m1 := statetest.AddMachine(t, st, model, "")
	for _, app := range []string{"mysql", "wordpress"} {
		if _, err := st.AddApplication(t.Context(), model, state.ApplicationParams{Name: app, CharmURL: "local:" + app + "-0"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.AddApplication(t.Context(), model, state.ApplicationParams{Name: "logs", CharmURL: "local:logs-0", Subordinate: true}); err != nil {
		t.Fatal(err)
	}
	add := func(app, machine, principal string) string {
		t.Helper()
		u, err := st.AddUnit(t.Context(), model, app, machine, principal)
		if err != nil {
			t.Fatal(err)
		}
		return u.Name
	}
	w0 := add("wordpress", m0.ID, "")
	my := add("mysql", m0.ID, "")
	lg := add("logs", "", w0)
	w1 := add("wordpress", m1.ID, "")
	unassigned := add("wordpress", "", "")
	on := func(machine string, want ...string) {
		t.Helper()
		got, err := state.UnitsByMachineIndex(st, model, machine)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("index of machine %s: %v (%v), want %v", machine, got, err, want)
		}
		us, err := st.UnitsOnMachine(t.Context(), model, machine)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, u := range us {
			names = append(names, u.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("UnitsOnMachine(%s) = %v, want %v", machine, names, want)
		}
	}
	on(m0.ID, lg, my, w0)
	on(m1.ID, w1)
	on("") // units without a machine are not indexed
	_ = unassigned
	if err := st.EnsureMachineDead(t.Context(), model, m1.ID); !errors.Is(err, state.ErrHasAssignedUnits) {
		t.Errorf("EnsureMachineDead of a machine with a unit: %v", err)
	}
	if err := st.RemoveUnit(t.Context(), model, w1); err != nil {
		t.Fatal(err)
	}
	on(m1.ID)
	if err := st.EnsureMachineDead(t.Context(), model, m1.ID); err != nil {
		t.Errorf("EnsureMachineDead of a machine without units: %v", err)
	}
	if _, err := st.DestroyMachines(t.Context(), model, []string{m0.ID}, false); !errors.Is(err, state.ErrHasAssignedUnits) {
		t.Errorf("DestroyMachines of a machine with units: %v", err)
	}
}

// The model name index makes names unique in the transaction that adds the
// model, and frees the name with the model.
func TestModelNameIndex(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := statetest.AddModel(t, st, "prod", state.ModelTypeIAAS)
	if _, err := st.AddModel(t.Context(), "prod", state.ModelTypeCAAS, nil); !errors.Is(err, errors.AlreadyExists) {
		t.Errorf("a second model named prod: %v", err)
	}
	if got, err := st.ModelByName(t.Context(), "prod"); err != nil || got.UUID != m.UUID {
		t.Errorf("ModelByName = %+v, %v", got, err)
	}
	if _, removed, err := st.RemoveModel(t.Context(), m.UUID); err != nil || !removed {
		t.Fatalf("RemoveModel = %v, %v", removed, err)
	}
	if uuids, err := state.ModelsByNameIndex(st, "prod"); err != nil || len(uuids) != 0 {
		t.Errorf("index after the removal: %v, %v", uuids, err)
	}
	if _, err := st.ModelByName(t.Context(), "prod"); !errors.Is(err, errors.NotFound) {
		t.Errorf("ModelByName of a removed model: %v", err)
	}
	again := statetest.AddModel(t, st, "prod", state.ModelTypeCAAS)
	if got, err := st.ModelByName(t.Context(), "prod"); err != nil || got.UUID != again.UUID {
		t.Errorf("the name reused: %+v, %v", got, err)
	}
}
