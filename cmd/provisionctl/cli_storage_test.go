package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/state"
)

// A charm whose units may lose their storage ("multiple": count 0 to 2).
const filesMetadata = `name: files
summary: a file server
storage:
  data:
    type: filesystem
    location: /srv
    multiple:
      range: 0-2
`

// lines checks that out holds each line, in order, as whole lines.
func lines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	i := 0
	for _, l := range got {
		if i < len(want) && l == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("%s: no line %q (in order) in:\n%s", what, want[i], out)
	}
}

// The storage verbs and the removals that leave storage behind, as an
// operator runs them: remove-application (units removed, storage
// detached, the application dead until its unit provisioner clears it),
// storage and status showing detached and orphaned storage, detach-storage,
// remove-storage (attached refused with Juju's hint, --force,
// --no-destroy), and remove-model refused without a storage decision, then
// finishing with --release-storage.
func TestStorageWalkthrough(t *testing.T) {
	e := startDaemon(t)
	st := e.d.State()
	files := writeFiles(t, map[string]string{"files.yaml": filesMetadata})
	e.ok(t, nil, "add-model", "k8s", "--type", "caas", "--config", "workload-storage=standard")
	k8s, err := st.ModelByName(t.Context(), "k8s")
	if err != nil {
		t.Fatal(err)
	}
	e.ok(t, nil, "create-storage-pool", "fast", "kubernetes", "-m", "k8s")
	e.ok(t, nil, "deploy", "files", "--charm-metadata", files["files.yaml"], "-m", "k8s", "--scale", "3", "--storage", "data=fast,1G,1")
	reportPods(t, st, k8s.UUID, "files", 3, 1)

	// The cluster loses b-pod and c-pod (scale 1): their storage is
	// detached. Then a new pod claims c-pod's volume: the storage
	// instance of c-pod's filesystem goes and the filesystem is left
	// dying, attached to nothing, orphaned (Juju's unit provisioner
	// cleans orphans so).
	reportPods(t, st, k8s.UUID, "files", 1, 2)
	one := 1
	if _, err := st.UpdateCAASUnits(t.Context(), k8s.UUID, "files", state.UnitsUpdate{Scale: &one, Generation: 3, Pods: []state.Pod{
		{ProviderID: "a-pod", Status: "running", Stateful: true},
		{ProviderID: "d-pod", Status: "running", Stateful: true, Filesystems: []state.PodFilesystem{{StorageName: "data", Size: 1024,
			FilesystemID: "pv-c-pod", Status: "attached", MountPoint: "/srv",
			Volume: &state.PodVolume{VolumeID: "vol-d-pod", Size: 1024, Persistent: true, Status: "attached"}}}}}}); err != nil {
		t.Fatal(err)
	}
	r := e.ok(t, nil, "storage", "-m", "k8s")
	lines(t, "storage", r.stdout,
		"UNIT        STORAGE               KIND        POOL  SIZE  STATUS    MESSAGE",
		"(detached)  data/1                filesystem  fast  1G    detached",
		"files/0     data/0                filesystem  fast  1G    attached",
		"files/3     data/3                filesystem  fast  1G    attached",
		"(orphaned)  filesystem-files-2-0  filesystem  fast  1G    detached",
	)
	r = e.ok(t, nil, "status", "-m", "k8s")
	lines(t, "status", r.stdout,
		"STORAGE               UNIT        POOL  SIZE  FILESYSTEM  VOLUME     STATUS    LOCATION",
		"data/0                files/0     fast  1G    pv-a-pod    vol-a-pod  attached  /var/opt/gitlab",
		"data/1                (detached)  fast  1G    pv-b-pod    vol-b-pod  detached",
		"filesystem-files-2-0  (orphaned)  fast  1G    pv-c-pod    vol-c-pod  detached",
	)
	r = e.ok(t, nil, "storage", "--filesystem", "-m", "k8s")
	lines(t, "storage --filesystem", r.stdout, "files/2/0   (orphaned)  -        vol-c-pod  pv-c-pod     -                1G    detached  dying")

	// detach-storage, then remove-storage: attached storage is refused
	// with Juju's hint; --force detaches it; --no-destroy releases.
	if r := e.ok(t, nil, "detach-storage", "data/0", "-m", "k8s"); !strings.Contains(r.stderr, "Detached storage data/0.") {
		t.Errorf("detach-storage:\n%s", r)
	}
	rev := st.Revision()
	r = e.run(t, "remove-storage", "data/3", "-m", "k8s")
	if r.code != 1 || !strings.Contains(r.stderr, `ERROR cannot destroy storage "data/3": storage is attached`) ||
		!strings.Contains(r.stderr, "Use the --force option to remove attached storage") || st.Revision() != rev {
		t.Errorf("remove-storage attached:\n%s", r)
	}
	if r := e.ok(t, nil, "remove-storage", "data/3", "--force", "-m", "k8s"); !strings.Contains(r.stderr, "Destroyed 1 storage instance, 1 filesystem, 1 volume.") {
		t.Errorf("remove-storage --force:\n%s", r)
	}
	mut, r := e.mutate(t, nil, "remove-storage", "data/1", "--no-destroy", "-m", "k8s")
	if !slices.Equal(mut.Removed["storage"], []string{"data/1"}) || !slices.Equal(mut.Removed["volumes"], []string{"1"}) {
		t.Errorf("remove-storage --no-destroy printed %+v", mut)
	}
	if r := e.ok(t, nil, "remove-storage", "data/0", "--no-destroy", "-m", "k8s"); !strings.Contains(r.stderr,
		"Released 1 storage instance, 1 filesystem, 1 volume; left in the cloud: pv-a-pod, vol-a-pod.") {
		t.Errorf("remove-storage --no-destroy:\n%s", r)
	}

	// remove-application: the units go, the application is dead until
	// its unit provisioner clears it.
	mut, r = e.mutate(t, nil, "remove-application", "files", "-m", "k8s")
	if !slices.Equal(mut.Removed["units"], []string{"files/0", "files/3"}) || !slices.Equal(mut.Dying["applications"], []string{"files"}) {
		t.Errorf("remove-application printed %+v\n%s", mut, r)
	}

	// remove-model: refused while persistent storage is left and nothing
	// is said of it (Juju's text); both flags are a usage error.
	rev = st.Revision()
	r = e.run(t, "remove-model", "k8s", "-y")
	if r.code != 1 || !strings.Contains(r.stderr, `ERROR cannot remove model "k8s"`) ||
		!strings.Contains(r.stderr, "The model has persistent storage remaining:\n    1 volume and 1 filesystem\n") ||
		!strings.Contains(r.stderr, `"--release-storage"`) || st.Revision() != rev {
		t.Errorf("remove-model without a storage decision:\n%s", r)
	}
	if r := e.run(t, "remove-model", "k8s", "-y", "--destroy-storage", "--release-storage"); r.code != 2 ||
		!strings.Contains(r.stderr, "--destroy-storage and --release-storage cannot both be specified") {
		t.Errorf("remove-model with both flags:\n%s", r)
	}
	r = e.ok(t, nil, "remove-model", "k8s", "-y", "--release-storage")
	if !strings.Contains(r.stderr, `Model "k8s" is dying; it is removed when its last entity is.`) ||
		!strings.Contains(r.stderr, "Released 1 filesystem, 1 volume; left in the cloud: pv-c-pod, vol-c-pod.") {
		t.Errorf("remove-model --release-storage:\n%s", r)
	}
	// The unit provisioner clears the dead application: the model goes.
	if errs := st.ClearAndRemoveApplications(t.Context(), k8s.UUID, []string{"files"}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if _, err := st.ModelByName(t.Context(), "k8s"); err == nil {
		t.Error("the model is still there")
	}
}
