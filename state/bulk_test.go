package state_test

import (
	"fmt"
	"testing"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// errTexts returns the texts of errs ("" for nil).
func errTexts(errs []error) []string {
	out := make([]string, len(errs))
	for i, err := range errs {
		if err != nil {
			out[i] = err.Error()
		}
	}
	return out
}

func checkErrs(t *testing.T, what string, errs []error, want ...string) {
	t.Helper()
	got := errTexts(errs)
	if len(got) != len(want) {
		t.Fatalf("%s: %d results %q, want %d", what, len(got), got, len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: item %d: %q, want %q", what, i, got[i], want[i])
		}
	}
}

// TestBulkMachineWrites: each bulk write of machines commits its valid
// items in one revision, leaves a refused item's writes out, even those it
// made before it failed, and gives each item its own error.
func TestBulkMachineWrites(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	ms := make([]state.Machine, 4)
	for i := range ms {
		ms[i] = statetest.AddMachine(t, st, model, "")
	}
	vol, err := st.AddMachine(t.Context(), model, state.MachineParams{Volumes: []state.VolumeParams{{Pool: "loop", Size: 1024}}})
	if err != nil {
		t.Fatal(err)
	}
	vols, err := st.MachineVolumes(t.Context(), model, vol.ID)
	if err != nil || len(vols) != 1 {
		t.Fatalf("volumes of machine %s: %v, %v", vol.ID, vols, err)
	}
	meta, _ := charm.ParseMeta([]byte("name: web\n"))
	if _, err := st.AddIAASApplication(t.Context(), model, state.IAASApplicationParams{Name: "web", Charm: state.Charm{Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(t.Context(), model, "web", ms[3].ID, ""); err != nil {
		t.Fatal(err)
	}
	oneCommit := func(what string, rev uint64) {
		t.Helper()
		if !revisionsAfter(st, rev, 1) {
			t.Errorf("%s: revision %d -> %d, want one commit", what, rev, st.Revision())
		}
	}

	rev := st.Revision()
	errs := st.SetInstanceInfos(t.Context(), model, []state.MachineInstanceInfo{
		{ID: ms[0].ID, Info: state.InstanceInfo{InstanceID: "i-0", Nonce: "n-0"}},
		{ID: ms[1].ID, Info: state.InstanceInfo{InstanceID: "i-1"}},
		// Its volume's info is written, then the unknown attachment
		// fails the item: neither the volume nor the machine keep it.
		{ID: vol.ID, Info: state.InstanceInfo{InstanceID: "i-v", Nonce: "n-v",
			Volumes:           map[string]state.VolumeInfo{vols[0].ID: {VolumeID: "vol-1", Size: 1024}},
			VolumeAttachments: map[string]state.VolumeAttachmentInfo{"99": {DeviceName: "sdb"}}}},
		{ID: "42", Info: state.InstanceInfo{InstanceID: "i-42", Nonce: "n-42"}},
		{ID: ms[2].ID, Info: state.InstanceInfo{InstanceID: "i-2", Nonce: "n-2"}},
	})
	if errs[2] == nil {
		t.Fatalf("the item with an unknown attachment committed")
	}
	checkErrs(t, "SetInstanceInfos", errs,
		"",
		fmt.Sprintf("cannot set instance data for machine %q: instance id and nonce cannot be empty", ms[1].ID),
		errs[2].Error(),
		"machine 42 not found",
		"")
	oneCommit("SetInstanceInfos", rev)
	for _, c := range []struct {
		id, inst string
	}{{ms[0].ID, "i-0"}, {ms[1].ID, ""}, {vol.ID, ""}, {ms[2].ID, "i-2"}} {
		if m, err := st.Machine(t.Context(), model, c.id); err != nil || m.InstanceID != c.inst {
			t.Errorf("machine %s: instance %q, %v; want %q", c.id, m.InstanceID, err, c.inst)
		}
	}
	if vs, _ := st.MachineVolumes(t.Context(), model, vol.ID); len(vs) != 1 || vs[0].Info != nil {
		t.Errorf("the refused item's volume info was kept: %+v", vs)
	}

	rev = st.Revision()
	checkErrs(t, "SetMachinePasswords", st.SetMachinePasswords(t.Context(), model, []state.MachinePassword{
		{ID: ms[0].ID, Password: statetest.MachinePassword + "-new"},
		{ID: ms[1].ID, Password: "short"},
		{ID: "42", Password: statetest.MachinePassword},
	}), "", "password is only 5 bytes long, and is not a valid Agent password", "machine 42 not found")
	oneCommit("SetMachinePasswords", rev)
	if ok, _ := st.MachinePasswordValid(t.Context(), model, ms[0].ID, statetest.MachinePassword+"-new"); !ok {
		t.Errorf("machine %s's new password is not valid", ms[0].ID)
	}

	rev = st.Revision()
	checkErrs(t, "SetMachinesCharmProfiles", st.SetMachinesCharmProfiles(t.Context(), model, []state.MachineCharmProfiles{
		{ID: ms[0].ID, Profiles: []string{"p"}}, {ID: "42"},
	}), "", "machine 42 not found")
	oneCommit("SetMachinesCharmProfiles", rev)

	rev = st.Revision()
	checkErrs(t, "SetMachinesSupportedContainers", st.SetMachinesSupportedContainers(t.Context(), model, []state.MachineContainers{
		{ID: ms[0].ID, Types: []string{"lxd"}}, {ID: ms[1].ID, Types: []string{"docker"}},
	}), "", `container type "docker" not valid`)
	oneCommit("SetMachinesSupportedContainers", rev)
	if m, _ := st.Machine(t.Context(), model, ms[1].ID); m.SupportedContainersKnown {
		t.Errorf("the refused item's containers were recorded")
	}

	rev = st.Revision()
	checkErrs(t, "EnsureMachinesDead", st.EnsureMachinesDead(t.Context(), model, []string{ms[1].ID, ms[3].ID, ms[2].ID, "42"}),
		"", fmt.Sprintf(`machine %s has unit "web/0" assigned`, ms[3].ID), "", "machine 42 not found")
	oneCommit("EnsureMachinesDead", rev)

	rev = st.Revision()
	checkErrs(t, "MarkMachinesForRemoval", st.MarkMachinesForRemoval(t.Context(), model, []string{ms[1].ID, ms[0].ID}),
		"", fmt.Sprintf("cannot remove machine %s: machine is not dead", ms[0].ID))
	oneCommit("MarkMachinesForRemoval", rev)

	rev = st.Revision()
	released, errs := st.RemoveMachines(t.Context(), model, []string{ms[1].ID, ms[0].ID, ms[2].ID})
	checkErrs(t, "RemoveMachines", errs, "", fmt.Sprintf("cannot remove machine %s: machine is not dead", ms[0].ID), "")
	if len(released) != 3 {
		t.Errorf("released = %v", released)
	}
	oneCommit("RemoveMachines", rev)
	left, err := st.Machines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range left {
		ids = append(ids, m.ID)
	}
	if fmt.Sprint(ids) != fmt.Sprint([]string{ms[0].ID, ms[3].ID, vol.ID}) {
		t.Errorf("machines left: %v", ids)
	}

	// A bulk whose every item is refused commits nothing.
	rev = st.Revision()
	if errs := st.EnsureMachinesDead(t.Context(), model, []string{"42", "43"}); errs[0] == nil || errs[1] == nil || st.Revision() != rev {
		t.Errorf("refused bulk: %v, revision %d -> %d", errs, rev, st.Revision())
	}
	if errs := st.SetMachineStatuses(t.Context(), model, nil); len(errs) != 0 || st.Revision() != rev {
		t.Errorf("empty bulk: %v, revision %d -> %d", errs, rev, st.Revision())
	}
}

// TestBulkSplitsWhatEtcdRefuses: a bulk whose one transaction would exceed
// etcd's operations per transaction is split, and every item commits.
func TestBulkSplitsWhatEtcdRefuses(t *testing.T) {
	t.Parallel()
	c, prefix := sharedEtcd(t), newPrefix()
	big, err := statetest.OpenStore(etcdStore(t, c, prefix), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { big.Close() })
	if _, err := big.Initialize(t.Context(), statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	model := statetest.DefaultModelUUID
	const n = 40
	units, machines, err := big.AddUnits(t.Context(), model, "web", state.AddUnitsParams{Count: 1})
	if err == nil || units != nil || machines != nil {
		t.Fatalf("AddUnits of a missing application: %v, %v, %v", units, machines, err)
	}
	var args []state.MachineStatusArg
	for range n {
		m, err := big.AddMachine(t.Context(), model, state.MachineParams{})
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, state.MachineStatusArg{ID: m.ID, Kind: state.ModificationStatus, Status: state.Status{Status: "applied"}})
	}
	// A daemon told that etcd takes 16 operations per transaction.
	small, err := statetest.OpenStore(etcdStoreOps(t, c, prefix, 16), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { small.Close() })
	syncStates(t, []*state.State{big, small})
	for i, err := range small.SetMachineStatuses(t.Context(), model, args) {
		if err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
	syncStates(t, []*state.State{big, small})
	ms, err := big.Machines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, m := range ms {
		if m.ModificationStatus.Status == "applied" {
			applied++
		}
	}
	if applied != n {
		t.Errorf("%d machines with the bulk's status, want %d", applied, n)
	}
}

// TestBulkCAASUnits: UpdateCAASApplicationsUnits commits the valid
// applications' updates together; one whose pods name storage its charm
// lacks (checked in the transaction) is left out with its error, and a
// refused scale keeps the rest of its item.
func TestBulkCAASUnits(t *testing.T) {
	t.Parallel()
	st, model := caasModel(t)
	for _, name := range []string{"db", "web", "api"} {
		meta, err := charm.ParseMeta([]byte("name: " + name + "\nstorage:\n  data:\n    type: filesystem\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: name, Charm: state.Charm{Meta: meta}, Scale: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// The unit provisioner's own scale report waits for a scale an
	// operator set to be applied: api's is refused.
	if err := st.SetApplicationScale(t.Context(), model, "api", 3); err != nil {
		t.Fatal(err)
	}
	one := 1
	rev := st.Revision()
	infos, errs := st.UpdateCAASApplicationsUnits(t.Context(), model, []state.ApplicationUnitsUpdate{
		{Application: "db", Update: state.UnitsUpdate{Pods: []state.Pod{{ProviderID: "db-0", Status: "running"}}}},
		{Application: "web", Update: state.UnitsUpdate{Pods: []state.Pod{{ProviderID: "web-0", Status: "running",
			Filesystems: []state.PodFilesystem{{StorageName: "logs", FilesystemID: "pv-1", Status: "attached"}}}}}},
		{Application: "api", Update: state.UnitsUpdate{Scale: &one, Pods: []state.Pod{{ProviderID: "api-0", Status: "running"}}}},
		{Application: "nope", Update: state.UnitsUpdate{}},
	})
	if len(errs) != 4 || errs[0] != nil || errs[1] == nil || errs[2] == nil || errs[3] == nil {
		t.Fatalf("errors %q", errTexts(errs))
	}
	if got := errs[1].Error(); got != `filesystem info of pod "web-0" names storage "logs" that charm "local:web-0" does not have` {
		t.Errorf("web: %q", got)
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("revision %d -> %d, want one commit", rev, st.Revision())
	}
	if len(infos[0]) != 1 || infos[0][0] != (state.UnitInfo{ProviderID: "db-0", Unit: "db/0"}) || infos[1] != nil {
		t.Errorf("infos %+v", infos)
	}
	if len(infos[2]) != 1 || infos[2][0].Unit != "api/0" {
		t.Errorf("api: the refused scale's unit info %+v (error %v)", infos[2], errs[2])
	}
	for app, want := range map[string]int{"db": 1, "web": 0, "api": 1} {
		if us, err := st.CAASUnits(t.Context(), model, app); err != nil || len(us) != want {
			t.Errorf("%s: %d units, %v; want %d", app, len(us), err, want)
		}
	}
	if a, _ := st.Application(t.Context(), model, "api"); a.Scale != 3 {
		t.Errorf("api's scale %d after a refused report, want 3", a.Scale)
	}
}

// TestBulkApplications: SetOperatorStatuses and ClearAndRemoveApplications
// commit their valid items together; an alive application is refused alone
// and is neither cleared nor removed.
func TestBulkApplications(t *testing.T) {
	t.Parallel()
	st, model := caasModel(t)
	meta, _ := charm.ParseMeta([]byte("name: web\n"))
	for _, name := range []string{"a", "b", "c"} {
		if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: name, Charm: state.Charm{Meta: meta}, Scale: 1}); err != nil {
			t.Fatal(err)
		}
	}
	rev := st.Revision()
	checkErrs(t, "SetOperatorStatuses", st.SetOperatorStatuses(t.Context(), model, []state.OperatorStatusArg{
		{Application: "a", Status: state.Status{Status: "active"}},
		{Application: "nope", Status: state.Status{Status: "active"}},
		{Application: "b", Status: state.Status{Status: "waiting"}},
	}), "", `application "nope" not found`, "")
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("SetOperatorStatuses: revision %d -> %d, want one commit", rev, st.Revision())
	}
	if s, _ := st.OperatorStatus(t.Context(), model, "b"); s.Status != "waiting" {
		t.Errorf("b's operator status %+v", s)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := st.DestroyApplication(t.Context(), model, name, false); err != nil {
			t.Fatal(err)
		}
	}
	rev = st.Revision()
	checkErrs(t, "ClearAndRemoveApplications", st.ClearAndRemoveApplications(t.Context(), model, []string{"a", "c", "b"}),
		"", `application "c" is alive`, "")
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("ClearAndRemoveApplications: revision %d -> %d, want one commit", rev, st.Revision())
	}
	apps, err := st.Applications(t.Context(), model)
	if err != nil || len(apps) != 1 || apps[0].Name != "c" || !apps[0].HasResources {
		t.Errorf("applications left: %+v, %v", apps, err)
	}
}

// TestRemoveUnitsAllOrNone: RemoveUnits removes every unit in one commit,
// or none when one is unknown.
func TestRemoveUnitsAllOrNone(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	meta, _ := charm.ParseMeta([]byte("name: web\n"))
	if _, err := st.AddIAASApplication(t.Context(), model, state.IAASApplicationParams{Name: "web", Charm: state.Charm{Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	units, machines, err := st.AddUnits(t.Context(), model, "web", state.AddUnitsParams{Count: 3})
	if err != nil || len(units) != 3 || len(machines) != 3 {
		t.Fatalf("AddUnits = %v, %v, %v", units, machines, err)
	}
	rev := st.Revision()
	if _, err := st.RemoveUnits(t.Context(), model, []string{units[0], "web/9", units[1]}); err == nil || err.Error() != `unit "web/9" not found` {
		t.Errorf("RemoveUnits with an unknown unit: %v", err)
	}
	if st.Revision() != rev {
		t.Errorf("a refused RemoveUnits wrote")
	}
	if _, err := st.RemoveUnits(t.Context(), model, units[:2]); err != nil {
		t.Fatal(err)
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("revision %d -> %d, want one commit", rev, st.Revision())
	}
	if us, _ := st.Units(t.Context(), model); len(us) != 1 || us[0].Name != units[2] {
		t.Errorf("units left: %+v", us)
	}
}
