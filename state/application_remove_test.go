package state_test

import (
	"slices"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/storage"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// TestDestroyApplicationCAAS: what one destroy of a Kubernetes application
// leaves, with and without units and with destroy-storage. The expected
// values are Juju's (state/application.go DestroyApplicationOperation.
// destroyOps: no units and cluster resources pending -> dead in the
// destroy's transaction; with units, the units are destroyed
// (cleanupUnitsForDyingApplication), and state/unit.go removes a unit
// whose agent never ran at once, detaching its storage, or destroying it
// with DestroyStorage; the last unit's removal brings the application's
// cleanup, which makes it dead while resources are pending) with
// provisiond's one difference: no unit agent ever runs, so every unit goes
// at once, in the same transaction.
func TestDestroyApplicationCAAS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		pods           int
		destroyStorage bool
		units          []string
		storage        []string // taken out, kind/id
		detached       []string // storage instances left, detached
	}{
		{name: "no units"},
		{name: "units", pods: 2, units: []string{"db/0", "db/1"}, detached: []string{"data/0", "logs/0", "data/1", "logs/1"}},
		{name: "units, destroy-storage", pods: 2, destroyStorage: true, units: []string{"db/0", "db/1"},
			storage: []string{"storage/data/0", "filesystem/db/0/0", "volume/0", "storage/logs/0", "filesystem/db/0/1",
				"storage/data/1", "filesystem/db/1/0", "volume/1", "storage/logs/1", "filesystem/db/1/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, model := storageApp(t)
			var pods []state.Pod
			for i := range tc.pods {
				n := string(rune('0' + i))
				pods = append(pods, pod("db-"+n, "pvc-"+n, "pv-"+n))
			}
			if tc.pods > 0 {
				if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(tc.pods), Pods: pods}); err != nil {
					t.Fatal(err)
				}
			}
			apps, _, err := st.WatchApplications(t.Context(), model)
			must(t, err)
			defer apps.Stop()
			entity, err := st.WatchApplication(t.Context(), model, "db")
			must(t, err)
			defer entity.Stop()

			rev := st.Revision()
			got, err := st.DestroyApplication(t.Context(), model, "db", tc.destroyStorage)
			if err != nil {
				t.Fatal(err)
			}
			if !revisionsAfter(st, rev, 1) {
				t.Errorf("revision %d -> %d, want one commit", rev, st.Revision())
			}
			if got.Life != state.Dead || got.Removed || !slices.Equal(got.Units, tc.units) || len(got.DyingMachines) != 0 {
				t.Errorf("DestroyApplication = %+v", got)
			}
			var taken []string
			for _, d := range got.Storage {
				taken = append(taken, d.Kind+"/"+d.ID)
				if d.Released {
					t.Errorf("released %+v", d)
				}
			}
			if !slices.Equal(taken, tc.storage) {
				t.Errorf("storage taken out = %v, want %v", taken, tc.storage)
			}
			// The unit provisioner's watchers see it dead.
			watchertest.StringsAssertChange(t, apps, "db")
			watchertest.NotifyAssertChange(t, entity)
			a, err := st.Application(t.Context(), model, "db")
			if err != nil || a.Life != state.Dead || !a.HasResources {
				t.Fatalf("application = %+v, %v", a, err)
			}
			if units, err := st.CAASUnits(t.Context(), model, "db"); err != nil || len(units) != 0 {
				t.Errorf("units = %+v, %v", units, err)
			}
			var left []string
			for _, si := range mustStorage(t, st, model) {
				left = append(left, si.ID)
				if si.Unit != "" || si.Owner != "" {
					t.Errorf("storage %+v is still attached", si)
				}
			}
			if !slices.Equal(left, tc.detached) {
				t.Errorf("storage left = %v, want %v", left, tc.detached)
			}
			for _, fs := range mustFilesystems(t, st, model) {
				if fs.Attachment != nil || fs.Status.Status != "detached" {
					t.Errorf("filesystem %+v", fs)
				}
			}
			for _, v := range mustVolumes(t, st, model) {
				if len(v.Attachments) != 0 {
					t.Errorf("volume %+v", v)
				}
			}
			// Dead: a second destroy changes nothing; pod reports are
			// ignored.
			rev = st.Revision()
			if again, err := st.DestroyApplication(t.Context(), model, "db", false); err != nil || again.Life != state.Dead || st.Revision() != rev {
				t.Errorf("second DestroyApplication = %+v, %v (revision %d -> %d)", again, err, rev, st.Revision())
			}
			if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Pods: []state.Pod{pod("db-9", "pvc-9", "pv-9")}}); err != nil {
				t.Fatal(err)
			}
			if units, _ := st.CAASUnits(t.Context(), model, "db"); len(units) != 0 {
				t.Errorf("a dead application got units: %+v", units)
			}

			// The unit provisioner deleted its resources: it goes, with
			// its records; its storage stays.
			watchertest.StringsAssertNoChange(t, apps) // its death was reported
			if errs := st.ClearAndRemoveApplications(t.Context(), model, []string{"db"}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			if _, err := st.Application(t.Context(), model, "db"); !errors.Is(err, errors.NotFound) {
				t.Errorf("application after clearing: %v", err)
			}
			if _, err := st.ApplicationConfig(t.Context(), model, "db"); !errors.Is(err, errors.NotFound) {
				t.Errorf("config after clearing: %v", err)
			}
			if n := len(mustStorage(t, st, model)); n != len(tc.detached) {
				t.Errorf("storage after clearing: %d", n)
			}
		})
	}
}

// The records of an application go with it: config, pod spec, cloud
// service, operator status (Juju's removeOps); its charm stays.
func TestClearAndRemoveApplicationRecords(t *testing.T) {
	t.Parallel()
	st, model := caasModel(t)
	meta, _ := charm.ParseMeta([]byte("name: web\n"))
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "web", Charm: state.Charm{URL: "local:web-0", Meta: meta},
		PodSpec: "containers: []"}); err != nil {
		t.Fatal(err)
	}
	if errs := st.UpdateApplicationsServices(t.Context(), model, []state.ServiceUpdate{{Application: "web", ProviderID: "svc-1"}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if errs := st.SetOperatorStatuses(t.Context(), model, []state.OperatorStatusArg{{Application: "web", Status: state.Status{Status: "active"}}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if errs := st.ClearAndRemoveApplications(t.Context(), model, []string{"web"}); errs[0] == nil || errs[0].Error() != `application "web" is alive` {
		t.Fatalf("clearing an alive application: %v", errs[0])
	}
	if _, err := st.DestroyApplication(t.Context(), model, "web", false); err != nil {
		t.Fatal(err)
	}
	if errs := st.ClearAndRemoveApplications(t.Context(), model, []string{"web"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for what, err := range map[string]error{
		"application": func() error { _, err := st.Application(t.Context(), model, "web"); return err }(),
		"pod spec":    func() error { _, err := st.K8sSpec(t.Context(), model, "web"); return err }(),
		"service":     func() error { _, err := st.CloudService(t.Context(), model, "web"); return err }(),
	} {
		if !errors.Is(err, errors.NotFound) {
			t.Errorf("%s after removal: %v", what, err)
		}
	}
	if s, err := st.OperatorStatus(t.Context(), model, "web"); err != nil || s.Status != "" {
		t.Errorf("operator status after removal: %+v, %v", s, err)
	}
	if _, err := st.Charm(t.Context(), model, "local:web-0"); err != nil {
		t.Errorf("the charm goes with the model, not the application: %v", err)
	}
	if errs := st.ClearAndRemoveApplications(t.Context(), model, []string{"web"}); !errors.Is(errs[0], errors.NotFound) {
		t.Errorf("clearing a removed application: %v", errs[0])
	}
}

// TestDestroyApplicationIAAS: an IAAS application has no cluster resources,
// so its destroy removes it with its units (Juju: removeOps once the unit
// count is zero), the subordinates of its units with them; a machine left
// without a principal unit and hosting no container becomes dying (Juju's
// state/unit.go destroyHostOps); a machine still hosting another principal,
// or a container, stays.
func TestDestroyApplicationIAAS(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	deploy := func(name, meta string) {
		m, err := charm.ParseMeta([]byte(meta))
		must(t, err)
		_, err = st.AddIAASApplication(t.Context(), model, state.IAASApplicationParams{Name: name, Charm: state.Charm{Meta: m}})
		must(t, err)
	}
	deploy("web", "name: web\n")
	deploy("db", "name: db\n")
	deploy("logs", "name: logs\nsubordinate: true\nrequires:\n  host:\n    interface: juju-info\n    scope: container\n")
	// web/0 alone on machine 0; web/1 beside db/0 on machine 1; web/2 on
	// machine 2, which hosts a container.
	units, machines, err := st.AddUnits(t.Context(), model, "web", state.AddUnitsParams{Count: 3})
	must(t, err)
	if _, err := st.AddUnit(t.Context(), model, "db", machines[1], ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: machines[2], ContainerType: "lxd"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(t.Context(), model, "logs", "", units[0]); err != nil {
		t.Fatal(err)
	}

	rev := st.Revision()
	got, err := st.DestroyApplication(t.Context(), model, "web", false)
	if err != nil {
		t.Fatal(err)
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("revision %d -> %d, want one commit", rev, st.Revision())
	}
	want := state.ApplicationDestroyed{Life: state.Dead, Removed: true, Units: []string{"logs/0", "web/0", "web/1", "web/2"},
		DyingMachines: []string{machines[0]}}
	if got.Life != want.Life || got.Removed != want.Removed || !slices.Equal(got.Units, want.Units) || !slices.Equal(got.DyingMachines, want.DyingMachines) {
		t.Errorf("DestroyApplication = %+v\nwant %+v", got, want)
	}
	if _, err := st.Application(t.Context(), model, "web"); !errors.Is(err, errors.NotFound) {
		t.Errorf("application: %v", err)
	}
	us, err := st.Units(t.Context(), model)
	if err != nil || len(us) != 1 || us[0].Name != "db/0" {
		t.Errorf("units left = %+v, %v", us, err)
	}
	for id, life := range map[string]state.Life{machines[0]: state.Dying, machines[1]: state.Alive, machines[2]: state.Alive} {
		if m, err := st.Machine(t.Context(), model, id); err != nil || m.Life != life {
			t.Errorf("machine %s = %s, %v; want %s", id, m.Life, err, life)
		}
	}
	// The subordinate application stays, without units.
	if a, err := st.Application(t.Context(), model, "logs"); err != nil || a.Life != state.Alive {
		t.Errorf("subordinate application = %+v, %v", a, err)
	}
}

// RemoveUnits removes a principal's subordinates with it, and makes its
// machine dying as Juju's destroyHostOps does, never a controller machine.
func TestRemoveUnitsHostMachines(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	meta, _ := charm.ParseMeta([]byte("name: web\n"))
	if _, err := st.AddIAASApplication(t.Context(), model, state.IAASApplicationParams{Name: "web", Charm: state.Charm{Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	ctrl := statetest.AddMachine(t, st, model, "n0", state.JobManageModel)
	units, machines, err := st.AddUnits(t.Context(), model, "web", state.AddUnitsParams{Count: 2, To: []string{ctrl.ID}})
	must(t, err)
	got, err := st.RemoveUnits(t.Context(), model, units)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Units, units) || !slices.Equal(got.DyingMachines, machines) {
		t.Errorf("RemoveUnits = %+v; want units %v, machines %v dying", got, units, machines)
	}
	if m, err := st.Machine(t.Context(), model, ctrl.ID); err != nil || m.Life != state.Alive {
		t.Errorf("controller machine = %+v, %v", m, err)
	}
	// The application stays alive: removing units does not destroy it.
	if a, err := st.Application(t.Context(), model, "web"); err != nil || a.Life != state.Alive {
		t.Errorf("application = %+v, %v", a, err)
	}
}

// An application too large for one transaction of the store is destroyed
// in steps (dying first, then its units in batches, the last batch making
// it dead), with the same outcome. etcd is told it allows few operations
// per transaction, whichever store the suite runs on.
func TestDestroyApplicationInSteps(t *testing.T) {
	t.Parallel()
	st := smallTxnState(t, 96)
	m := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS)
	meta, _ := charm.ParseMeta([]byte("name: web\nstorage:\n  data:\n    type: filesystem\n"))
	if _, err := st.AddCAASApplication(t.Context(), m.UUID, state.CAASApplicationParams{Name: "web", Charm: state.Charm{Meta: meta}, Scale: 1,
		Storage: map[string]storage.Constraints{"data": {Count: 1, Size: 64}}}); err != nil {
		t.Fatal(err)
	}
	const n = 24
	for i := range n {
		if _, err := st.AddCAASUnit(t.Context(), m.UUID, "web", state.CAASUnitParams{}); err != nil {
			t.Fatalf("unit %d: %v", i, err)
		}
	}
	// One transaction would delete at least five keys per unit (the
	// unit, its storage instance, filesystem and volume, their index
	// entries): over 96 for 24 units.
	got, err := st.DestroyApplication(t.Context(), m.UUID, "web", true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Life != state.Dead || got.Removed || len(got.Units) != n || len(got.Storage) != 3*n {
		t.Errorf("DestroyApplication = life %s removed %v, %d units, %d storage", got.Life, got.Removed, len(got.Units), len(got.Storage))
	}
	if a, err := st.Application(t.Context(), m.UUID, "web"); err != nil || a.Life != state.Dead {
		t.Errorf("application = %+v, %v", a, err)
	}
	if units, _ := st.CAASUnits(t.Context(), m.UUID, "web"); len(units) != 0 {
		t.Errorf("%d units left", len(units))
	}
}

// smallTxnState opens an initialized state on the shared etcd, under a
// prefix of its own, with a store told that etcd allows maxOps operations
// per transaction.
func smallTxnState(t *testing.T, maxOps int) *state.State {
	t.Helper()
	st, err := statetest.OpenStore(etcdStoreOps(t, sharedEtcd(t), newPrefix(), maxOps), state.Options{})
	return initialized(t, st, err)
}
