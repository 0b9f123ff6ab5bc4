package state_test

import (
	"strings"
	"testing"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

// The CAAS write path at the state level: UpdateCAASUnits with the pods'
// filesystems and their volumes (specs/caasunitprovisioner.md §4.4-4.5):
// storage made with units, provisioning info and statuses recorded, a
// removed unit's storage detached and kept, orphaned storage cleaned up,
// and every refusal leaving the store as it was.

// storageApp deploys "db" with one filesystem of charm storage "data" per
// unit in the default kubernetes pool (backed by a volume) and "logs" on
// tmpfs (no volume), scale 2.
func storageApp(t *testing.T) (*state.State, string) {
	t.Helper()
	return storageAppOf(t, `name: db
storage:
  data:
    type: filesystem
    location: /data
  logs:
    type: filesystem
`)
}

// storageAppOf is storageApp with db's charm metadata given (its storage
// must be "data" and "logs").
func storageAppOf(t *testing.T, metadata string) (*state.State, string) {
	t.Helper()
	st, model := caasModel(t)
	meta, err := charm.ParseMeta([]byte(metadata))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "db", Charm: state.Charm{Meta: meta}, Scale: 2,
		Storage: map[string]storage.Constraints{"data": {Count: 1, Size: 1024}, "logs": {Count: 1, Size: 64, Pool: "tmpfs"}}}); err != nil {
		t.Fatal(err)
	}
	return st, model
}

// pod is a stateful pod of db with its data filesystem (on volume vol)
// and its logs filesystem, both attached.
func pod(id, fs, vol string) state.Pod {
	return state.Pod{ProviderID: id, Status: "running", Stateful: true, Address: "10.0.0.1", Filesystems: []state.PodFilesystem{
		{StorageName: "data", FilesystemID: fs, Size: 1024, Status: "attached", MountPoint: "/data",
			Volume: &state.PodVolume{VolumeID: vol, Size: 1024, Persistent: true, Status: "attached"}},
		{StorageName: "logs", FilesystemID: fs + "-logs", Size: 64, Status: "attached", MountPoint: "/logs", ReadOnly: true},
	}}
}

func scale(n int) *int { return &n }

func filesystemsByStorage(t *testing.T, st *state.State, model string) map[string]state.Filesystem {
	t.Helper()
	fss, err := st.Filesystems(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state.Filesystem{}
	for _, fs := range fss {
		key := fs.StorageID
		if key == "" {
			key = "orphan:" + fs.ID
		}
		out[key] = fs
	}
	return out
}

func volumesByStorage(t *testing.T, st *state.State, model string) map[string]state.Volume {
	t.Helper()
	vs, err := st.Volumes(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state.Volume{}
	for _, v := range vs {
		out[v.StorageID] = v
	}
	return out
}

func TestCAASStorageLifeCycle(t *testing.T) {
	t.Parallel()
	st, model := storageApp(t)

	// Two pods: two units, each with its storage, provisioned as the
	// pods report it.
	info, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(2), Pods: []state.Pod{
		pod("db-0", "pvc-0", "pv-0"), pod("db-1", "pvc-1", "pv-1")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info) != 2 || info[0] != (state.UnitInfo{ProviderID: "db-0", Unit: "db/0"}) || info[1] != (state.UnitInfo{ProviderID: "db-1", Unit: "db/1"}) {
		t.Fatalf("info = %+v", info)
	}
	u, err := st.Unit(t.Context(), model, "db/1")
	if err != nil || u.ProviderID() != "db-1" || u.Container.Address != "10.0.0.1" || u.AgentStatus.Status != "idle" || u.ContainerStatus.Status != "running" {
		t.Errorf("unit db/1 = %+v, %v", u, err)
	}
	sis, err := st.StorageInstances(t.Context(), model)
	if err != nil || len(sis) != 4 {
		t.Fatalf("storage instances = %+v, %v", sis, err)
	}
	owners := map[string]string{}
	for _, si := range sis {
		owners[si.ID] = si.Owner
		if si.Owner != si.Unit || si.Life != state.Alive || si.Kind != "filesystem" {
			t.Errorf("storage instance %+v", si)
		}
	}
	if owners["data/0"] != "db/0" || owners["data/1"] != "db/1" || owners["logs/0"] != "db/0" || owners["logs/1"] != "db/1" {
		t.Errorf("owners = %v", owners)
	}
	fss := filesystemsByStorage(t, st, model)
	vols := volumesByStorage(t, st, model)
	for i, unit := range []string{"db/0", "db/1"} {
		n := string(rune('0' + i))
		data, logs := fss["data/"+n], fss["logs/"+n]
		if data.Info == nil || data.Info.FilesystemID != "pvc-"+n || data.Info.Size != 1024 || data.Status.Status != "attached" ||
			data.Attachment == nil || data.Attachment.Unit != unit || data.Attachment.Info == nil || data.Attachment.Info.MountPoint != "/data" {
			t.Errorf("data filesystem of %s: %+v (attachment %+v)", unit, data, data.Attachment)
		}
		if data.VolumeID == "" || logs.VolumeID != "" {
			t.Errorf("%s: data on volume %q, logs on volume %q; want the kubernetes pool's volume and none for tmpfs", unit, data.VolumeID, logs.VolumeID)
		}
		if logs.Info == nil || logs.Info.FilesystemID != "pvc-"+n+"-logs" || logs.Attachment.Info == nil || !logs.Attachment.Info.ReadOnly {
			t.Errorf("logs filesystem of %s: %+v", unit, logs)
		}
		v := vols["data/"+n]
		if v.ID != data.VolumeID || v.Info == nil || v.Info.VolumeID != "pv-"+n || !v.Info.Persistent || v.Status.Status != "attached" ||
			len(v.Attachments) != 1 || v.Attachments[0].Unit != unit || v.Attachments[0].Info == nil {
			t.Errorf("volume of %s: %+v", unit, v)
		}
	}

	// A filesystem status that Juju refuses fails the whole update.
	rev := st.Revision()
	bad := pod("db-0", "pvc-0", "pv-0")
	bad.Filesystems[0].Status = "bogus"
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Pods: []state.Pod{bad, pod("db-1", "pvc-1", "pv-1")}}); err == nil ||
		!strings.Contains(err.Error(), `cannot set invalid status "bogus"`) {
		t.Errorf("bogus filesystem status: %v", err)
	}
	bad = pod("db-0", "pvc-0", "pv-0")
	bad.Filesystems[0].Volume.Status = "error"
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Pods: []state.Pod{bad, pod("db-1", "pvc-1", "pv-1")}}); err == nil ||
		!strings.Contains(err.Error(), `cannot set status "error" without info`) {
		t.Errorf("volume error without info: %v", err)
	}
	if st.Revision() != rev {
		t.Errorf("refused updates wrote: revision %d -> %d", rev, st.Revision())
	}

	// The cluster scales to one: db/1 goes, its storage is detached and
	// kept (no owner, no attachments), its filesystems marked detached.
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(1), Pods: []state.Pod{pod("db-0", "pvc-0", "pv-0")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Unit(t.Context(), model, "db/1"); err == nil {
		t.Errorf("unit db/1 survived the scale down")
	}
	sis, _ = st.StorageInstances(t.Context(), model)
	for _, si := range sis {
		if strings.HasSuffix(si.ID, "/1") && (si.Owner != "" || si.Unit != "") {
			t.Errorf("db/1's storage instance %+v kept its owner", si)
		}
	}
	fss = filesystemsByStorage(t, st, model)
	if fs := fss["data/1"]; fs.Attachment != nil || fs.Status.Status != "detached" || fs.Life != state.Alive {
		t.Errorf("db/1's data filesystem after the scale down: %+v", fs)
	}
	if v := volumesByStorage(t, st, model)["data/1"]; len(v.Attachments) != 0 {
		t.Errorf("db/1's volume kept its attachment: %+v", v)
	}

	// A new pod reports the old persistent volume claim again: its unit
	// gets new storage, and the orphaned storage of that claim is
	// destroyed (the instance removed, the filesystem dying).
	info, err = st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(2), Pods: []state.Pod{
		pod("db-0", "pvc-0", "pv-0"), pod("db-2", "pvc-1", "pv-1")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(info) != 2 || info[1] != (state.UnitInfo{ProviderID: "db-2", Unit: "db/2"}) {
		t.Errorf("info = %+v", info)
	}
	sis, _ = st.StorageInstances(t.Context(), model)
	ids := map[string]string{}
	for _, si := range sis {
		ids[si.ID] = si.Owner
	}
	if _, ok := ids["data/1"]; ok {
		t.Errorf("the orphaned storage instance data/1 is still there: %v", ids)
	}
	if ids["data/2"] != "db/2" || ids["logs/2"] != "db/2" {
		t.Errorf("db/2's storage: %v", ids)
	}
	fss = filesystemsByStorage(t, st, model)
	var orphans []state.Filesystem
	for key, fs := range fss {
		if strings.HasPrefix(key, "orphan:") {
			orphans = append(orphans, fs)
		}
	}
	if len(orphans) != 2 {
		t.Fatalf("orphaned filesystems %+v, want db/1's two", orphans)
	}
	for _, fs := range orphans {
		if fs.Life != state.Dying || fs.Attachment != nil || !strings.HasPrefix(fs.ID, "db/1/") {
			t.Errorf("orphaned filesystem %+v", fs)
		}
	}
	if fs := fss["data/2"]; fs.Info == nil || fs.Info.FilesystemID != "pvc-1" || fs.Attachment == nil || fs.Attachment.Unit != "db/2" {
		t.Errorf("db/2's data filesystem: %+v", fs)
	}
}

// TestCAASStorageRefusals: provisioning info the store cannot take is
// refused with nothing written: a filesystem without its id, a
// volume-backed filesystem whose volume the pod did not report, pending
// status once provisioned.
func TestCAASStorageRefusals(t *testing.T) {
	t.Parallel()
	st, model := storageApp(t)
	// Pending storage: statuses only, no info.
	pending := pod("db-0", "", "")
	for i := range pending.Filesystems {
		pending.Filesystems[i].Status = "pending"
	}
	pending.Filesystems[0].Volume.Status = "pending"
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Pods: []state.Pod{pending}}); err != nil {
		t.Fatal(err)
	}
	fss := filesystemsByStorage(t, st, model)
	if fs := fss["data/0"]; fs.Info != nil || fs.Status.Status != "pending" {
		t.Errorf("pending filesystem: %+v", fs)
	}

	for _, tc := range []struct {
		name string
		edit func(*state.Pod)
		want string
	}{
		{"no filesystem id", func(p *state.Pod) { p.Filesystems[1].FilesystemID = "" }, "filesystem ID not set"},
		{"volume not reported", func(p *state.Pod) { p.Filesystems[0].Volume = nil }, "is not attached"},
		{"storage the charm lacks", func(p *state.Pod) { p.Filesystems[1].StorageName = "cache" }, `names storage "cache" that charm`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := st.Revision()
			p := pod("db-0", "pvc-0", "pv-0")
			tc.edit(&p)
			if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Pods: []state.Pod{p}}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
			if st.Revision() != rev {
				t.Errorf("a refused update wrote")
			}
		})
	}

	// Provisioned: the info is recorded, and pending is no longer a
	// status the filesystem may take.
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Pods: []state.Pod{pod("db-0", "pvc-0", "pv-0")}}); err != nil {
		t.Fatal(err)
	}
	rev := st.Revision()
	again := pod("db-0", "pvc-0", "pv-0")
	again.Filesystems[1].Status = "pending"
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Pods: []state.Pod{again}}); err == nil ||
		!strings.Contains(err.Error(), `cannot set status "pending"`) {
		t.Errorf("pending once provisioned: %v", err)
	}
	if st.Revision() != rev {
		t.Errorf("a refused update wrote")
	}
	// A removed unit's storage is detached with it (RemoveUnit of a
	// CAAS unit through the unit provisioner's report: pods gone).
	if _, err := st.UpdateCAASUnits(t.Context(), model, "db", state.UnitsUpdate{Scale: scale(0), Pods: nil}); err != nil {
		t.Fatal(err)
	}
	if us, _ := st.CAASUnits(t.Context(), model, "db"); len(us) != 0 {
		t.Errorf("units after scale 0 without pods: %+v", us)
	}
	for _, si := range mustStorage(t, st, model) {
		if si.Owner != "" {
			t.Errorf("storage %+v kept its owner", si)
		}
	}
}

func mustStorage(t *testing.T, st *state.State, model string) []state.StorageInstance {
	t.Helper()
	sis, err := st.StorageInstances(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	return sis
}

// TestCAASPodStatuses: a pod's status maps to its unit's agent and
// container statuses as Juju maps them (§4.4); "unknown" leaves both.
func TestCAASPodStatuses(t *testing.T) {
	t.Parallel()
	st, model := caasModel(t)
	meta, _ := charm.ParseMeta([]byte("name: web\n"))
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "web", Charm: state.Charm{Meta: meta}, Scale: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pod, info        string
		agent, container string
	}{
		{"allocating", "pulling", "allocating", "waiting"},
		{"running", "", "idle", "running"},
		{"error", "crash loop", "error", "error"},
		{"blocked", "", "idle", "blocked"},
		{"unknown", "ignored", "idle", "blocked"}, // left as they were
	} {
		p := state.Pod{ProviderID: "web-0", Status: tc.pod, Info: tc.info}
		if _, err := st.UpdateCAASUnits(t.Context(), model, "web", state.UnitsUpdate{Pods: []state.Pod{p}}); err != nil {
			t.Fatalf("%s: %v", tc.pod, err)
		}
		u, err := st.Unit(t.Context(), model, "web/0")
		if err != nil {
			t.Fatal(err)
		}
		if u.AgentStatus.Status != tc.agent || u.ContainerStatus.Status != tc.container {
			t.Errorf("pod %s: agent %q, container %q; want %q, %q", tc.pod, u.AgentStatus.Status, u.ContainerStatus.Status, tc.agent, tc.container)
		}
		if tc.pod == "error" && (u.AgentStatus.Message != tc.info || u.ContainerStatus.Message != tc.info) {
			t.Errorf("pod error: messages %q, %q", u.AgentStatus.Message, u.ContainerStatus.Message)
		}
	}
}
