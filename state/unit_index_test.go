package state_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// The provider id index follows the units' provider ids, tells apart ids
// that hold "\x00", and is rebuilt from the units when the state opens.
func TestUnitProviderIDIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := state.Open(state.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Initialize(statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	model := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS).UUID
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"a", "b"} {
		if _, err := st.AddCAASApplication(model, state.CAASApplicationParams{Name: app,
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
		if _, err := st.UpdateCAASUnits(model, app, state.UnitsUpdate{Scale: &two, Pods: pods}); err != nil {
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

	if err := state.SpoilUnitIndex(st, model); err != nil {
		t.Fatal(err)
	}
	check("p")
	check("ghost", "nobody/0")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = state.Open(state.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check("p", "a/0")
	check("p\x00b", "a/1", "b/0")
	check("q", "b/1")
	check("ghost")
}
