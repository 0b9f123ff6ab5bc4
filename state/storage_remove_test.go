package state_test

import (
	"slices"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/storage"
)

// optionalStorageApp is storageApp with storage a unit may lose: "data"
// and "logs" of count 0 to 2 (one each per unit), and the two pods
// reported with their storage provisioned. storageApp's storage is
// singular (no "multiple"), which Juju never detaches from an alive unit.
func optionalStorageApp(t *testing.T) (*state.State, string) {
	t.Helper()
	st, model := storageAppOf(t, `name: db
storage:
  data:
    type: filesystem
    location: /data
    multiple:
      range: 0-2
  logs:
    type: filesystem
    multiple:
      range: 0-2
`)
	storagePods(t, st, model)
	return st, model
}

// storagePods reports db's two pods with their storage provisioned.
func storagePods(t *testing.T, st *state.State, model string) {
	t.Helper()
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(2), Pods: []state.Pod{
		pod("db-0", "pvc-0", "pv-0"), pod("db-1", "pvc-1", "pv-1")}}); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveStorageRefusals: every refusal of RemoveStorage, all or none.
// The texts are Juju's (state/storage.go destroyStorageInstance's "cannot
// destroy storage %q" / "cannot release storage %q" annotations,
// StorageAttachedError "storage is attached", checkStoragePoolReleasable,
// validateCharmStorageCountChange), db's "data" and "logs" having
// count-min 0 and one's count-min 1.
func TestRemoveStorageRefusals(t *testing.T) {
	t.Parallel()
	st, model := optionalStorageApp(t)
	meta, err := charm.ParseMeta([]byte("name: one\nstorage:\n  data:\n    type: filesystem\n    multiple:\n      range: 1-2\n"))
	must(t, err)
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "one", Charm: state.Charm{Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASUnit(t.Context(), model, "one", state.CAASUnitParams{ProviderID: "one-0"}); err != nil {
		t.Fatal(err)
	}
	// one/0's instance of its required storage: the third "data".
	var required string
	for _, si := range mustStorage(t, st, model) {
		if si.Owner == "one/0" {
			required = si.ID
		}
	}
	for _, tc := range []struct {
		ids   []string
		p     state.RemoveStorageParams
		want  string
		is    error
		codes string
	}{
		{ids: []string{"nope/0"}, want: `storage "nope/0" not found`, is: errors.NotFound},
		{ids: []string{"data/0"}, want: `cannot destroy storage "data/0": storage is attached`, is: state.ErrStorageAttached},
		{ids: []string{"data/0"}, p: state.RemoveStorageParams{Release: true}, want: `cannot release storage "data/0": storage is attached`, is: state.ErrStorageAttached},
		{ids: []string{"logs/0"}, p: state.RemoveStorageParams{Force: true, Release: true},
			want: `cannot release storage "logs/0": storage provider "tmpfs" does not support releasing storage`},
		{ids: []string{required}, p: state.RemoveStorageParams{Force: true},
			want: `cannot destroy storage "` + required + `": detaching 1 storage instance brings the total to 0, which is less than the minimum of 1`},
		// All or none: a good id does not go with a bad one.
		{ids: []string{"data/1", "nope/0"}, p: state.RemoveStorageParams{Force: true}, want: `storage "nope/0" not found`, is: errors.NotFound},
	} {
		rev := st.Revision()
		_, err := st.RemoveStorage(t.Context(), model, tc.ids, tc.p)
		if err == nil || err.Error() != tc.want || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("RemoveStorage(%v, %+v) = %v, want %q", tc.ids, tc.p, err, tc.want)
		}
		if st.Revision() != rev {
			t.Errorf("RemoveStorage(%v, %+v) wrote", tc.ids, tc.p)
		}
	}
	if _, err := st.RemoveStorage(t.Context(), statetest.DefaultModelUUID, []string{"data/0"}, state.RemoveStorageParams{}); !errors.Is(err, errors.NotFound) {
		t.Errorf("storage of another model: %v", err)
	}
}

// TestRemoveStorage: forced, it detaches then takes out; released storage
// is reported so, with its provider ids; a detached instance needs no
// force.
func TestRemoveStorage(t *testing.T) {
	t.Parallel()
	st, model := optionalStorageApp(t)
	got, err := st.RemoveStorage(t.Context(), model, []string{"data/0", "data/0"}, state.RemoveStorageParams{Force: true, Release: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []state.DisposedStorage{
		{Kind: "storage", ID: "data/0", Released: true},
		{Kind: "filesystem", ID: "db/0/0", ProviderID: "pvc-0", Released: true},
		{Kind: "volume", ID: "0", ProviderID: "pv-0", Released: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("RemoveStorage = %+v\nwant %+v", got, want)
	}
	// The unit stays, with its other storage.
	if u, err := st.Unit(t.Context(), model, "db/0"); err != nil || u.Life != state.Alive {
		t.Errorf("unit = %+v, %v", u, err)
	}
	if _, err := st.DetachStorage(t.Context(), model, []string{"data/1"}); err != nil {
		t.Fatal(err)
	}
	got, err = st.RemoveStorage(t.Context(), model, []string{"data/1"}, state.RemoveStorageParams{})
	if err != nil || len(got) != 3 || got[0].Released {
		t.Errorf("RemoveStorage of detached storage = %+v, %v", got, err)
	}
	var left []string
	for _, si := range mustStorage(t, st, model) {
		left = append(left, si.ID)
	}
	if !slices.Equal(left, []string{"logs/0", "logs/1"}) {
		t.Errorf("storage left = %v", left)
	}
	if vs := mustVolumes(t, st, model); len(vs) != 0 {
		t.Errorf("volumes left = %+v", vs)
	}
}

// TestDetachStorage: the instance loses its unit and owner, its filesystem
// and volume their attachments; detached storage is left alone; a unit is
// never taken below its charm's minimum (Juju's text, state/storage.go
// validateCharmStorageCountChange: "cannot detach, storage is singular"
// for count 1-1).
func TestDetachStorage(t *testing.T) {
	t.Parallel()
	st, model := optionalStorageApp(t)
	meta, err := charm.ParseMeta([]byte("name: one\nstorage:\n  data:\n    type: filesystem\n"))
	must(t, err)
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "one", Charm: state.Charm{Meta: meta},
		Storage: map[string]storage.Constraints{"data": {Pool: "tmpfs", Count: 1, Size: 64}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASUnit(t.Context(), model, "one", state.CAASUnitParams{ProviderID: "one-0"}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	if _, err := st.DetachStorage(t.Context(), model, []string{"data/0", "data/2"}); err == nil ||
		err.Error() != `cannot detach storage "data/2" from unit "one/0": cannot detach, storage is singular` {
		t.Errorf("detaching singular storage: %v", err)
	}
	if _, err := st.DetachStorage(t.Context(), model, []string{"data/0", "x/9"}); !errors.Is(err, errors.NotFound) || err.Error() != `storage "x/9" not found` {
		t.Errorf("detaching unknown storage: %v", err)
	}
	if st.Revision() != rev {
		t.Errorf("a refused DetachStorage wrote")
	}
	got, err := st.DetachStorage(t.Context(), model, []string{"data/0"})
	if err != nil || !slices.Equal(got, []string{"data/0"}) {
		t.Fatalf("DetachStorage = %v, %v", got, err)
	}
	rev = st.Revision()
	if got, err := st.DetachStorage(t.Context(), model, []string{"data/0"}); err != nil || len(got) != 0 || st.Revision() != rev {
		t.Errorf("detaching detached storage = %v, %v (revision %d -> %d)", got, err, rev, st.Revision())
	}
	for _, si := range mustStorage(t, st, model) {
		if si.ID == "data/0" && (si.Unit != "" || si.Owner != "") {
			t.Errorf("storage %+v", si)
		}
	}
	fss := filesystemsByStorage(t, st, model)
	if fs := fss["data/0"]; fs.Attachment != nil || fs.Status.Status != "detached" {
		t.Errorf("filesystem %+v", fs)
	}
	if v := volumesByStorage(t, st, model)["data/0"]; len(v.Attachments) != 0 {
		t.Errorf("volume %+v", v)
	}
	// A pod report of the unit neither attaches it again nor destroys it.
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(2), Pods: []state.Pod{
		pod("db-0", "pvc-0", "pv-0"), pod("db-1", "pvc-1", "pv-1")}}); err != nil {
		t.Fatal(err)
	}
	for _, si := range mustStorage(t, st, model) {
		if si.ID == "data/0" && si.Unit != "" {
			t.Errorf("storage %+v", si)
		}
	}
	if fs := filesystemsByStorage(t, st, model)["data/0"]; fs.Life != state.Alive {
		t.Errorf("filesystem %+v after a pod report", fs)
	}
}

// A machine's volumes bound to it (loop, and the built-in environ's static
// volumes) go with it, as Juju destroys a dying machine's non-detachable
// storage.
func TestRemoveMachineTakesItsVolumes(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	m, err := st.AddMachine(t.Context(), model, state.MachineParams{Volumes: []state.VolumeParams{{Pool: "loop", Size: 1024}, {Pool: "ebs", Size: 2048}}})
	must(t, err)
	if vs := mustVolumes(t, st, model); len(vs) != 2 {
		t.Fatalf("volumes = %+v", vs)
	}
	must(t, st.EnsureMachineDead(t.Context(), model, m.ID))
	if _, err := st.RemoveMachine(t.Context(), model, m.ID); err != nil {
		t.Fatal(err)
	}
	if vs := mustVolumes(t, st, model); len(vs) != 0 {
		t.Errorf("volumes left = %+v", vs)
	}
}
