package modeladmin_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/storage"
)

// Application, model and storage removal through the wire: the operator's
// ModelAdmin calls, and what the controller agent's CAAS unit provisioner
// (CAASUnitProvisioner v2) sees of them. Juju's worker/caasunitprovisioner
// acts on an application only once WatchApplications reports it and Life
// says "dead" (or it is gone): then it deletes the service and, the pods
// gone, calls ClearApplicationsResources.

// dataMeta is a charm with one filesystem per unit, which a unit may lose
// (count 0 to 2, one by default).
const dataMeta = `name: db
storage:
  data:
    type: filesystem
    location: /data
    multiple:
      range: 0-2
`

// podsWithStorage reports n pods of app with their data filesystem and
// its persistent volume provisioned, as the unit provisioner does.
func podsWithStorage(e *testkit.CAASEnv, app string, n int) {
	e.T.Helper()
	var pods []params.ApplicationUnitParams
	for i := range n {
		id := app + "-" + string(rune('0'+i))
		pods = append(pods, params.ApplicationUnitParams{ProviderId: id, Address: "10.1.0.1", Status: "running", Stateful: true,
			FilesystemInfo: []params.KubernetesFilesystemInfo{{StorageName: "data", Size: 1024, FilesystemId: "pvc-" + id,
				Status: "attached", MountPoint: "/data", Volume: params.KubernetesVolumeInfo{VolumeId: "pv-" + id, Size: 1024,
					Persistent: true, Status: "attached"}}}})
	}
	if res := e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-" + app, Scale: testkit.Ptr[int](n), Generation: testkit.Ptr[int64](1), Units: pods}); res.Error != nil {
		e.T.Fatal(res.Error)
	}
}

// watchApplications starts the unit provisioner's lifecycle watcher and
// returns it with its initial event.
func watchApplications(e *testkit.CAASEnv) (*client.StringsWatcher, []string) {
	e.T.Helper()
	var res params.StringsWatchResult
	e.MustCall("WatchApplications", nil, &res)
	if res.Error != nil {
		e.T.Fatal(res.Error)
	}
	return client.NewStringsWatcher(e.C, res.StringsWatcherId), res.Changes
}

// nextApps waits (bounded) for the next event of a strings watcher; nil
// when none comes within d.
func nextApps(t *testing.T, w *client.StringsWatcher, d time.Duration) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), d)
	defer cancel()
	got, err := w.Next(ctx)
	if err != nil {
		return nil
	}
	return got
}

// life is what the unit provisioner's Life answers for an application:
// its life, or the error's code.
func life(e *testkit.CAASEnv, app string) string {
	e.T.Helper()
	var res params.LifeResults
	e.MustCall("Life", testkit.Ents("application-"+app), &res)
	if r := res.Results[0]; r.Error != nil {
		return "error: " + r.Error.Code
	}
	return res.Results[0].Life
}

// TestRemoveCAASApplication: with no units and with units, one
// remove-application leaves the application dead (Juju's destroyOps: no
// units and cluster resources pending -> dead; units are removed at once,
// as Juju does for units whose agent never ran), the unit provisioner's
// watcher delivers it and Life says dead; its ClearApplicationsResources
// removes it, which the watcher does not report again (a dead id is
// forgotten once reported, as in Juju's lifecycle watcher).
func TestRemoveCAASApplication(t *testing.T) {
	for _, tc := range []struct {
		name           string
		pods           int
		destroyStorage bool
		units          []string
		storage        int // instances left, detached
		destroyed      int // instances, filesystems and volumes destroyed
	}{
		{name: "no units"},
		{name: "units", pods: 2, units: []string{"db/0", "db/1"}, storage: 2},
		{name: "units, destroy-storage", pods: 2, destroyStorage: true, units: []string{"db/0", "db/1"}, destroyed: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testkit.NewCAAS(t, nil)
			e.Deploy("db", dataMeta, tc.pods, map[string]storage.Constraints{"data": {Count: 1, Size: 1024}})
			if tc.pods > 0 {
				podsWithStorage(e, "db", tc.pods)
			}
			apps, initial := watchApplications(e)
			if !slices.Equal(initial, []string{"db"}) {
				t.Fatalf("WatchApplications initial = %v", initial)
			}
			admin := client.NewModelAdmin(testkit.LoginAdmin(t, e.D, ""))
			res, err := admin.RemoveApplication(testkit.Ctx(t), params.RemoveApplicationArgs{Model: "k8s", Application: "db", DestroyStorage: tc.destroyStorage})
			if err != nil {
				t.Fatal(err)
			}
			if res.Life != "dead" || res.Removed || !slices.Equal(res.RemovedUnits, orNone(tc.units)) || len(res.Units) != 0 ||
				len(res.Storage) != tc.destroyed || len(res.DyingMachines) != 0 {
				t.Errorf("RemoveApplication = %+v", res)
			}
			if got := nextApps(t, apps, 5*time.Second); !slices.Equal(got, []string{"db"}) {
				t.Errorf("WatchApplications after remove-application = %v", got)
			}
			if l := life(e, "db"); l != "dead" {
				t.Errorf("Life = %s", l)
			}
			// The worker reads the charm of a dead application (to check
			// its format) before it acts.
			var ch params.Charm
			if err := e.Call("ApplicationCharmInfo", params.Entity{Tag: "application-db"}, &ch); err != nil || ch.URL == "" {
				t.Errorf("ApplicationCharmInfo of a dead application = %+v, %v", ch, err)
			}
			st := testkit.AdminCall[params.ModelStatus](t, testkit.LoginAdmin(t, e.D, ""), "Status", params.ModelArgs{Model: "k8s"})
			if len(st.Applications) != 1 || st.Applications[0].Life != "dead" || len(st.Applications[0].Units) != 0 ||
				len(st.Storage.Instances) != tc.storage {
				t.Errorf("Status = %+v, storage %+v", st.Applications, st.Storage.Instances)
			}

			var clr params.ErrorResults
			e.MustCall("ClearApplicationsResources", testkit.Ents("application-db"), &clr)
			if clr.Results[0].Error != nil {
				t.Fatal(clr.Results[0].Error)
			}
			if l := life(e, "db"); l != "error: "+params.CodeNotFound {
				t.Errorf("Life after clearing = %s", l)
			}
			if got := nextApps(t, apps, 200*time.Millisecond); got != nil {
				t.Errorf("WatchApplications after the removal of a reported dead application = %v", got)
			}
			st = testkit.AdminCall[params.ModelStatus](t, testkit.LoginAdmin(t, e.D, ""), "Status", params.ModelArgs{Model: "k8s"})
			if len(st.Applications) != 0 || len(st.Storage.Instances) != tc.storage {
				t.Errorf("Status after clearing = %+v, storage %+v", st.Applications, st.Storage.Instances)
			}
		})
	}
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// TestRemoveModelStorage: a Kubernetes model with persistent storage is
// refused without a decision (Juju's destroy-model: code "controller/model
// has persistent storage"), and with --destroy-storage or
// --release-storage it finishes: its applications are dead at once, the
// unit provisioner clears them, and the model is gone.
func TestRemoveModelStorage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision *bool
		released bool
	}{
		{"destroy-storage", testkit.Ptr(true), false},
		{"release-storage", testkit.Ptr(false), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testkit.NewCAAS(t, nil)
			e.Deploy("db", dataMeta, 2, map[string]storage.Constraints{"data": {Count: 1, Size: 1024}})
			podsWithStorage(e, "db", 2)
			admin := client.NewModelAdmin(testkit.LoginAdmin(t, e.D, ""))

			rev := e.St.Revision()
			_, err := admin.RemoveModel(testkit.Ctx(t), params.RemoveModelArgs{Model: "k8s"})
			testkit.WantErr(t, err, "model contains persistent storage: 2 volumes and 2 filesystems", params.CodeHasPersistentStorage)
			if e.St.Revision() != rev {
				t.Errorf("a refused RemoveModel wrote")
			}

			apps, _ := watchApplications(e)
			res, err := admin.RemoveModel(testkit.Ctx(t), params.RemoveModelArgs{Model: "k8s", DestroyStorage: tc.decision})
			if err != nil {
				t.Fatal(err)
			}
			if res.Removed || res.Life != "dying" || len(res.Storage) != 6 {
				t.Fatalf("RemoveModel = %+v", res)
			}
			for _, s := range res.Storage {
				if s.Released != tc.released || (s.Kind != "storage" && s.ProviderID == "") {
					t.Errorf("storage %+v", s)
				}
			}
			if got := nextApps(t, apps, 5*time.Second); !slices.Equal(got, []string{"db"}) || life(e, "db") != "dead" {
				t.Fatalf("WatchApplications = %v, Life %s", got, life(e, "db"))
			}
			var clr params.ErrorResults
			e.MustCall("ClearApplicationsResources", testkit.Ents("application-db"), &clr)
			if clr.Results[0].Error != nil {
				t.Fatal(clr.Results[0].Error)
			}
			models, err := admin.ListModels(testkit.Ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range models.Models {
				if m.Name == "k8s" {
					t.Errorf("model after its last application: %+v", m)
				}
			}
		})
	}
}

// TestRemoveAndDetachStorage: the single-instance verbs, good and bad
// input. The refusals' texts and codes are Juju's (state/storage.go,
// apiserver/errors: "storage is attached"); nothing a refusal names is
// changed.
func TestRemoveAndDetachStorage(t *testing.T) {
	e := testkit.NewCAAS(t, nil)
	e.Deploy("db", dataMeta, 3, map[string]storage.Constraints{"data": {Count: 1, Size: 1024}})
	podsWithStorage(e, "db", 3)
	// one/0 has data/3, singular, and scratch/0, both on tmpfs.
	e.Deploy("one", "name: one\nstorage:\n  data:\n    type: filesystem\n  scratch:\n    type: filesystem\n    multiple:\n      range: 0-2\n", 1,
		map[string]storage.Constraints{"data": {Pool: "tmpfs", Count: 1, Size: 64}, "scratch": {Pool: "tmpfs", Count: 1, Size: 64}})
	if res := e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-one", Scale: testkit.Ptr[int](1), Generation: testkit.Ptr[int64](1),
		Units: []params.ApplicationUnitParams{{ProviderId: "one-0", Status: "running"}}}); res.Error != nil {
		t.Fatal(res.Error)
	}
	c := testkit.LoginAdmin(t, e.D, "")
	admin := client.NewModelAdmin(c)
	const nf, nv, attached = params.CodeNotFound, params.CodeNotValid, params.CodeStorageAttached
	runBadInput(t, e.D, c, []badInputCase{
		{"remove none", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s"}, "no storage given", nv},
		{"remove bad id", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data"}}, `storage id "data" not valid (want NAME/N, such as data/0)`, nv},
		{"remove unknown", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data/9"}}, `storage "data/9" not found`, nf},
		{"remove wrong model", "RemoveStorage", params.RemoveStorageArgs{Storage: []string{"data/0"}}, `storage "data/0" not found`, nf},
		{"remove unknown model", "RemoveStorage", params.RemoveStorageArgs{Model: "nope", Storage: []string{"data/0"}}, `model "nope" not found`, nf},
		{"remove attached", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data/0"}},
			`cannot destroy storage "data/0": storage is attached`, attached},
		{"release attached", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data/0"}, NoDestroy: true},
			`cannot release storage "data/0": storage is attached`, attached},
		{"remove singular", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data/3"}, Force: true},
			`cannot destroy storage "data/3": cannot detach, storage is singular`, ""},
		{"release tmpfs", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s", Storage: []string{"scratch/0"}, Force: true, NoDestroy: true},
			`cannot release storage "scratch/0": storage provider "tmpfs" does not support releasing storage`, ""},
		{"remove all or none", "RemoveStorage", params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data/1", "data/9"}, Force: true},
			`storage "data/9" not found`, nf},
		{"detach none", "DetachStorage", params.DetachStorageArgs{Model: "k8s"}, "no storage given", nv},
		{"detach bad id", "DetachStorage", params.DetachStorageArgs{Model: "k8s", Storage: []string{"unit-db-0"}}, `storage id "unit-db-0" not valid`, nv},
		{"detach unknown", "DetachStorage", params.DetachStorageArgs{Model: "k8s", Storage: []string{"logs/0"}}, `storage "logs/0" not found`, nf},
		{"detach singular", "DetachStorage", params.DetachStorageArgs{Model: "k8s", Storage: []string{"data/0", "data/3"}},
			`cannot detach storage "data/3" from unit "one/0": cannot detach, storage is singular`, ""},
	})

	// Detach: the storage stays, detached; again, nothing to do.
	det, err := admin.DetachStorage(testkit.Ctx(t), params.DetachStorageArgs{Model: "k8s", Storage: []string{"data/0"}})
	if err != nil || !slices.Equal(det.Detached, []string{"data/0"}) {
		t.Fatalf("DetachStorage = %+v, %v", det, err)
	}
	if det, err := admin.DetachStorage(testkit.Ctx(t), params.DetachStorageArgs{Model: "k8s", Storage: []string{"data/0"}}); err != nil || len(det.Detached) != 0 {
		t.Errorf("DetachStorage again = %+v, %v", det, err)
	}
	// Remove: detached storage needs no force; attached needs it;
	// released storage is reported with its provider ids.
	rm, err := admin.RemoveStorage(testkit.Ctx(t), params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data/0"}})
	want := []params.RemovedStorage{{Kind: "storage", ID: "data/0"}, {Kind: "filesystem", ID: "db/0/0", ProviderID: "pvc-db-0"},
		{Kind: "volume", ID: "0", ProviderID: "pv-db-0"}}
	if err != nil || !slices.Equal(rm.Removed, want) {
		t.Errorf("RemoveStorage = %+v, %v\nwant %+v", rm, err, want)
	}
	rm, err = admin.RemoveStorage(testkit.Ctx(t), params.RemoveStorageArgs{Model: "k8s", Storage: []string{"data/1"}, Force: true, NoDestroy: true})
	if err != nil || len(rm.Removed) != 3 || !rm.Removed[2].Released || rm.Removed[2].ProviderID != "pv-db-1" {
		t.Errorf("RemoveStorage --force --no-destroy = %+v, %v", rm, err)
	}
	st := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{Model: "k8s"})
	var ids []string
	for _, si := range st.Storage.Instances {
		ids = append(ids, si.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"data/2", "data/3", "scratch/0"}) || len(st.Storage.Volumes) != 1 {
		t.Errorf("storage left: %v, volumes %+v", ids, st.Storage.Volumes)
	}
}
