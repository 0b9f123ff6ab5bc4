package agent_test

import (
	"os"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// The unit provisioner waits for a pod spec, then runs the application's
// pods with their filesystems and reports them: units with provider ids,
// addresses and attached storage. Scaling down stops pods; their units go
// and their storage is detached.
func TestKubernetesApplication(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	cloud := agent.NewSimCloud()
	runAgent(t, d, cloud)
	op := newOperator(t, d)
	op.call("AddModel", params.AddModelArgs{Name: "k8s", Type: "caas"}, nil)
	op.call("CreateStoragePool", params.CreateStoragePoolArgs{Model: "k8s", Name: "fast", Provider: "kubernetes",
		Attrs: map[string]any{"storage-class": "ssd"}}, nil)
	op.call("Deploy", params.DeployArgs{Model: "k8s", Application: "gitlab", Scale: ptr(3),
		CharmMetadata: readFile(t, "../../examples/gitlab/metadata.yaml"), Storage: []string{"data=fast,1G"}}, nil)
	op.call("SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "gitlab",
		Spec: readFile(t, "../../examples/gitlab/spec.yaml")}, nil)

	ready := func(n int) func(params.ModelStatus) bool {
		return func(s params.ModelStatus) bool {
			if len(s.Applications) != 1 || len(s.Applications[0].Units) != n {
				return false
			}
			for _, u := range s.Applications[0].Units {
				if u.ProviderID == "" || u.Address == "" || u.ContainerStatus.Status != "running" {
					return false
				}
			}
			att := 0
			for _, fs := range s.Storage.Filesystems {
				if fs.Attachment != nil && fs.Status.Status == "attached" {
					att++
				}
			}
			return att == n
		}
	}
	s := op.waitStatus("k8s", "3 pods", ready(3))
	app := s.Applications[0]
	if app.ProviderID == "" || len(app.Addresses) != 1 {
		t.Errorf("service: %q %v", app.ProviderID, app.Addresses)
	}
	for i, u := range app.Units {
		if want := "gitlab-" + string(rune('0'+i)); u.ProviderID != want || !strings.HasPrefix(u.Address, "10.1.") {
			t.Errorf("unit %s: pod %q address %q; want pod %q", u.Name, u.ProviderID, u.Address, want)
		}
	}
	for _, fs := range s.Storage.Filesystems {
		if fs.Pool != "fast" || fs.Size != 1024 || !strings.HasPrefix(fs.ProviderID, "data-gitlab-") ||
			fs.Attachment.MountPoint != "/var/opt/gitlab" || fs.VolumeID == "" {
			t.Errorf("filesystem %+v (attachment %+v)", fs, fs.Attachment)
		}
	}
	for _, v := range s.Storage.Volumes {
		if !strings.HasPrefix(v.ProviderID, "pv-data-gitlab-") || v.Status.Status != "attached" {
			t.Errorf("volume %+v", v)
		}
	}
	if cloud.Pods() != 3 {
		t.Errorf("cloud runs %d pods", cloud.Pods())
	}

	op.call("ScaleApplication", params.ScaleArgs{Model: "k8s", Application: "gitlab", Scale: 1}, nil)
	s = op.waitStatus("k8s", "1 pod", ready(1))
	if u := s.Applications[0].Units[0]; u.Name != "gitlab/0" || u.ProviderID != "gitlab-0" {
		t.Errorf("remaining unit %+v", u)
	}
	detached := 0
	for _, si := range s.Storage.Instances {
		if si.Unit == "" {
			detached++
		}
	}
	if len(s.Storage.Instances) != 3 || detached != 2 {
		t.Errorf("storage after scale 1: %+v", s.Storage.Instances)
	}

	// Removing the application: its units go at once (their storage
	// detached) and it is dead; the unit provisioner deletes its service
	// and pods, then clears its cluster resources, which removes it. Its
	// storage stays.
	var removed params.RemoveApplicationResult
	op.call("RemoveApplication", params.RemoveApplicationArgs{Model: "k8s", Application: "gitlab"}, &removed)
	if removed.Life != "dead" || removed.Removed || len(removed.RemovedUnits) != 1 {
		t.Errorf("RemoveApplication = %+v", removed)
	}
	s = op.waitStatus("k8s", "gitlab gone", func(s params.ModelStatus) bool { return len(s.Applications) == 0 })
	if cloud.Pods() != 0 {
		t.Errorf("cloud still runs %d pods", cloud.Pods())
	}
	if len(s.Storage.Instances) != 3 {
		t.Errorf("storage after removal: %+v", s.Storage.Instances)
	}

	// The model: refused while it holds persistent storage and nothing is
	// said of it; with --release-storage it goes at once, its storage
	// released.
	err := op.try("RemoveModel", params.RemoveModelArgs{Model: "k8s"}, nil)
	if !client.IsCode(err, params.CodeHasPersistentStorage) {
		t.Fatalf("RemoveModel without a storage decision: %v", err)
	}
	var gone params.RemoveModelResult
	op.call("RemoveModel", params.RemoveModelArgs{Model: "k8s", DestroyStorage: ptr(false)}, &gone)
	if !gone.Removed || len(gone.Storage) != 9 {
		t.Errorf("RemoveModel --release-storage = %+v", gone)
	}
	op.waitModelGone("k8s")
}
