package state_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/storage"
)

func ptr[T any](v T) *T { return &v }

// DestroyModel: an IAAS model's units go at once, its machines (and what
// they host) become dying, its applications go; the model goes with its
// last machine.
func TestDestroyModelIAAS(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := statetest.AddModel(t, st, "edge", state.ModelTypeIAAS)
	m0 := statetest.AddMachine(t, st, m.UUID, "n0")
	if _, err := st.AddMachine(t.Context(), m.UUID, state.MachineParams{ParentID: m0.ID, ContainerType: "lxd"}); err != nil {
		t.Fatal(err)
	}
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddIAASApplication(t.Context(), m.UUID, state.IAASApplicationParams{Name: "web", Charm: state.Charm{URL: "local:web-0", Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(t.Context(), m.UUID, "web", m0.ID, ""); err != nil {
		t.Fatal(err)
	}

	got, err := st.DestroyModel(t.Context(), m.UUID, state.DestroyModelParams{})
	if err != nil || got.Removed || got.Model.Life != state.Dying || len(got.Storage) != 0 {
		t.Fatalf("DestroyModel = %+v, %v", got, err)
	}
	ms, err := st.Machines(t.Context(), m.UUID)
	if err != nil || len(ms) != 2 || ms[0].Life != state.Dying || ms[1].Life != state.Dying {
		t.Fatalf("machines = %+v, %v", ms, err)
	}
	if units, err := st.Units(t.Context(), m.UUID); err != nil || len(units) != 0 {
		t.Errorf("units = %+v, %v", units, err)
	}
	if apps, err := st.Applications(t.Context(), m.UUID); err != nil || len(apps) != 0 {
		t.Errorf("applications = %+v, %v", apps, err)
	}
	// Again: nothing left to do, still dying.
	if got, err := st.DestroyModel(t.Context(), m.UUID, state.DestroyModelParams{}); err != nil || got.Removed {
		t.Fatalf("second DestroyModel = %+v, %v", got, err)
	}
	// The agents finish: the container, then its host.
	for _, id := range []string{m0.ID + "/lxd/0", m0.ID} {
		if err := st.EnsureMachineDead(t.Context(), m.UUID, id); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RemoveMachine(t.Context(), m.UUID, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Model(t.Context(), m.UUID); !errors.Is(err, errors.NotFound) {
		t.Errorf("model after its last machine: %v", err)
	}
}

// TestDestroyModelStorage: what becomes of a Kubernetes model's storage
// with each decision. storageApp's "data" storage is in the kubernetes
// provider (environ-scoped and dynamic: persistent, Juju's "detachable",
// backed by a volume), "logs" on tmpfs (bound to its pod). The expected
// values follow Juju's state/model.go destroyOps
// (checkModelEntityRefsNoPersistentStorage: only detachable volumes and
// filesystems count; refused with "model contains persistent storage",
// code "controller/model has persistent storage" in
// apiserver/errors/errors.go), its cleanupStorageForDyingModel
// (state/cleanup.go: destroy or release each storage instance) and
// cmd/juju/model/destroy.go (the counts, volumes first).
func TestDestroyModelStorage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		decision *bool
		refused  string
		released map[string]bool // by kind/id: released (true) or destroyed (false)
	}{{
		name:    "no decision",
		refused: "model contains persistent storage: 2 volumes and 2 filesystems",
	}, {
		name:     "destroy-storage",
		decision: ptr(true),
		released: map[string]bool{
			"storage/data/0": false, "filesystem/db/0/0": false, "volume/0": false,
			"storage/logs/0": false, "filesystem/db/0/1": false,
			"storage/data/1": false, "filesystem/db/1/0": false, "volume/1": false,
			"storage/logs/1": false, "filesystem/db/1/1": false,
		},
	}, {
		name:     "release-storage",
		decision: ptr(false),
		// tmpfs cannot be released: it goes with its pod (Juju releases
		// only detachable storage).
		released: map[string]bool{
			"storage/data/0": true, "filesystem/db/0/0": true, "volume/0": true,
			"storage/logs/0": false, "filesystem/db/0/1": false,
			"storage/data/1": true, "filesystem/db/1/0": true, "volume/1": true,
			"storage/logs/1": false, "filesystem/db/1/1": false,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, model := storageApp(t)
			if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(2), Pods: []state.Pod{
				pod("db-0", "pvc-0", "pv-0"), pod("db-1", "pvc-1", "pv-1")}}); err != nil {
				t.Fatal(err)
			}
			rev := st.Revision()
			got, err := st.DestroyModel(t.Context(), model, state.DestroyModelParams{DestroyStorage: tc.decision})
			if tc.refused != "" {
				if !errors.Is(err, state.ErrPersistentStorage) || err.Error() != tc.refused {
					t.Fatalf("DestroyModel = %+v, %v; want %q", got, err, tc.refused)
				}
				if st.Revision() != rev {
					t.Errorf("a refused DestroyModel wrote")
				}
				if m, err := st.Model(t.Context(), model); err != nil || m.Life != state.Alive {
					t.Errorf("model after refusal: %+v, %v", m, err)
				}
				return
			}
			if err != nil || got.Removed || got.Model.Life != state.Dying {
				t.Fatalf("DestroyModel = %+v, %v", got, err)
			}
			gotReleased := map[string]bool{}
			for _, d := range got.Storage {
				gotReleased[d.Kind+"/"+d.ID] = d.Released
				if d.Kind == "volume" && d.ProviderID != "pv-"+d.ID {
					t.Errorf("volume %s provider id %q", d.ID, d.ProviderID)
				}
			}
			if !maps.Equal(gotReleased, tc.released) {
				t.Errorf("storage taken out = %v\nwant %v", gotReleased, tc.released)
			}
			if a, err := st.Application(t.Context(), model, "db"); err != nil || a.Life != state.Dead {
				t.Fatalf("application = %+v, %v; want dead, waiting for its unit provisioner", a, err)
			}
			for _, n := range []int{len(mustStorage(t, st, model)), len(mustFilesystems(t, st, model)), len(mustVolumes(t, st, model))} {
				if n != 0 {
					t.Errorf("storage left: %d", n)
				}
			}
			// The unit provisioner clears the dead application: the
			// model goes with it.
			if errs := st.ClearAndRemoveApplications(t.Context(), model, []string{"db"}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			if _, err := st.Model(t.Context(), model); !errors.Is(err, errors.NotFound) {
				t.Errorf("model after its last application: %v", err)
			}
		})
	}
}

// No decision is needed when a model holds only storage bound to its hosts:
// tmpfs filesystems go with the model unasked (Juju's destroyOps counts
// only detachable storage).
func TestDestroyModelHostBoundStorage(t *testing.T) {
	t.Parallel()
	st, model := caasModel(t)
	meta, err := charm.ParseMeta([]byte("name: cache\nstorage:\n  scratch:\n    type: filesystem\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "cache", Charm: state.Charm{Meta: meta},
		Storage: map[string]storage.Constraints{"scratch": {Pool: "tmpfs", Count: 1, Size: 64}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASUnit(t.Context(), model, "cache", state.CAASUnitParams{ProviderID: "cache-0"}); err != nil {
		t.Fatal(err)
	}
	got, err := st.DestroyModel(t.Context(), model, state.DestroyModelParams{})
	if err != nil || got.Removed {
		t.Fatalf("DestroyModel = %+v, %v", got, err)
	}
	var kinds []string
	for _, d := range got.Storage {
		if d.Released {
			t.Errorf("released %+v", d)
		}
		kinds = append(kinds, d.Kind+"/"+d.ID)
	}
	if want := []string{"storage/scratch/0", "filesystem/cache/0/0"}; !slices.Equal(kinds, want) {
		t.Errorf("storage taken out = %v, want %v", kinds, want)
	}
	// Again, on the dying model: nothing to do, no decision needed.
	if got, err := st.DestroyModel(t.Context(), model, state.DestroyModelParams{}); err != nil || got.Removed || len(got.Storage) != 0 {
		t.Errorf("second DestroyModel = %+v, %v", got, err)
	}
}

func mustFilesystems(t *testing.T, st *state.State, model string) []state.Filesystem {
	t.Helper()
	fss, err := st.Filesystems(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	return fss
}

func mustVolumes(t *testing.T, st *state.State, model string) []state.Volume {
	t.Helper()
	vs, err := st.Volumes(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}
