package caasunitprovisioner_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// A Kubernetes model as the operator and the controller's unit provisioner
// run it, through the typed clients: the operator deploys an application
// with storage at scale 3, the unit provisioner reports its pods with their
// storage, the operator scales it to 1 and the surplus units go, their
// storage kept detached.
func TestCAASEndToEnd(t *testing.T) {
	srv := provisiondtest.Start(t)
	ctx := testkit.Ctx(t)
	k8s := srv.AddModel(t, "k8s", "caas", map[string]any{"workload-storage": "kubernetes"})
	op := client.NewModelAdmin(srv.Admin(t, ""))
	u := client.NewCAASUnitProvisioner(srv.ControllerAgent(t, k8s))
	apps := testkit.Got(u.WatchApplications(ctx)).OK(t)
	defer apps.Stop()
	if got := provisiondtest.Next(t, apps); len(got) != 0 {
		t.Fatalf("initial applications = %v", got)
	}

	// The operator deploys gitlab with storage at scale 3.
	scale := 3
	testkit.Got(op.Deploy(ctx, params.DeployArgs{Model: "k8s", Application: "gitlab", CharmMetadata: storageMeta,
		Scale: &scale, Storage: []string{"data=1G"}})).OK(t)
	testkit.Got(op.SetPodSpec(ctx, params.SetPodSpecArgs{Model: "k8s", Application: "gitlab", Spec: "containers: []"})).OK(t)
	if got := provisiondtest.Next(t, apps); !slices.Equal(got, []string{"gitlab"}) {
		t.Fatalf("applications = %v", got)
	}
	app := u.Application("gitlab")
	if info := testkit.Got(app.ProvisioningInfo(ctx)).OK(t); len(info.Filesystems) != 1 || info.Filesystems[0].Size != 1024 {
		t.Fatalf("ProvisioningInfo = %+v", info)
	}
	scaleW := testkit.Got(app.WatchScale(ctx)).OK(t)
	defer scaleW.Stop()
	provisiondtest.Next(t, scaleW)

	// The unit provisioner starts scale pods and reports them with their
	// storage.
	pod := func(i int) params.ApplicationUnitParams {
		id := string(rune('a'+i)) + "-pod"
		return params.ApplicationUnitParams{ProviderId: id, Address: "10.0.0." + string(rune('1'+i)), Ports: []string{"80"},
			Status: "running", Stateful: true, FilesystemInfo: []params.KubernetesFilesystemInfo{{StorageName: "data", Size: 1024,
				FilesystemId: "pv-" + id, Status: "attached", MountPoint: "/var/lib/juju/storage/data/0",
				Volume: params.KubernetesVolumeInfo{VolumeId: "pv-" + id, Size: 1024, Persistent: true, Status: "attached"}}}}
	}
	var pods []params.ApplicationUnitParams
	for i := range testkit.Got(app.Scale(ctx)).OK(t) {
		pods = append(pods, pod(i))
	}
	if info := testkit.Got(app.UpdateUnits(ctx, params.UpdateApplicationUnits{Scale: testkit.Ptr[int](3), Generation: testkit.Ptr[int64](1), Units: pods})).OK(t); len(info.Units) != 3 {
		t.Fatalf("UpdateUnits = %+v", info)
	}

	// provisionctl status (ModelAdmin.Status) shows the units with their
	// provider ids, addresses and attached storage.
	status := func() map[string]string {
		t.Helper()
		st := testkit.Got(op.Status(ctx, params.ModelArgs{Model: "k8s"})).OK(t)
		if len(st.Applications) != 1 || st.Applications[0].Name != "gitlab" {
			t.Fatalf("Status applications = %+v", st.Applications)
		}
		out := map[string]string{}
		for _, u := range st.Applications[0].Units {
			s := u.ProviderID + " " + u.Address
			for _, id := range u.Storage {
				for _, f := range st.Storage.Filesystems {
					if f.StorageID == id && f.Attachment != nil && f.Attachment.Unit == u.Name {
						s += " " + f.ProviderID + ":" + f.Status.Status
					}
				}
			}
			out[u.Name] = s
		}
		return out
	}
	want := map[string]string{
		"gitlab/0": "a-pod 10.0.0.1 pv-a-pod:attached",
		"gitlab/1": "b-pod 10.0.0.2 pv-b-pod:attached",
		"gitlab/2": "c-pod 10.0.0.3 pv-c-pod:attached",
	}
	if got := status(); !reflect.DeepEqual(got, want) {
		t.Fatalf("status = %v; want %v", got, want)
	}

	// The operator scales to 1: the scale watcher fires; the unit
	// provisioner's next report with one pod removes the surplus units and
	// detaches their storage.
	testkit.Got(op.ScaleApplication(ctx, params.ScaleArgs{Model: "k8s", Application: "gitlab", Scale: 1})).OK(t)
	provisiondtest.Next(t, scaleW)
	if n := testkit.Got(app.Scale(ctx)).OK(t); n != 1 {
		t.Fatalf("scale = %d", n)
	}
	testkit.Got(app.UpdateUnits(ctx, params.UpdateApplicationUnits{Scale: testkit.Ptr[int](1), Generation: testkit.Ptr[int64](2), Units: pods[:1]})).OK(t)
	if got := status(); !reflect.DeepEqual(got, map[string]string{"gitlab/0": "a-pod 10.0.0.1 pv-a-pod:attached"}) {
		t.Fatalf("status after scale = %v", got)
	}
	st := testkit.Got(op.Status(ctx, params.ModelArgs{Model: "k8s"})).OK(t)
	detached, owned := 0, 0
	for _, f := range st.Storage.Filesystems {
		if f.Attachment == nil && f.Status.Status == "detached" {
			detached++
		}
	}
	for _, si := range st.Storage.Instances {
		if si.Owner != "" {
			owned++
		}
	}
	if detached != 2 || owned != 1 {
		t.Errorf("detached filesystems = %d, owned storage = %d; want 2, 1", detached, owned)
	}
}
