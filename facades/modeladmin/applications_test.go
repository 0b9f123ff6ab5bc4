package modeladmin_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/facades/modeladmin"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// ModelAdmin's application and storage methods through the real RPC
// stack.

const webMeta = `
name: web
summary: a web server
storage:
  data:
    type: filesystem
    location: /srv/data
  cache:
    type: filesystem
    multiple:
      range: 0-4
deployment:
  type: stateful
  service: loadbalancer
devices:
  gpu:
    type: nvidia.com/gpu
    countmin: 1
    countmax: 2
`

const dbMeta = `
name: db
summary: a database
storage:
  disk:
    type: block
    multiple:
      range: 0-2
  logs:
    type: filesystem
    multiple:
      range: 0-1
`

func TestModelAdminCAASApplications(t *testing.T) {
	e := testkit.NewCAAS(t, nil)
	c := testkit.LoginAdmin(t, e.D, "")

	pool := testkit.AdminCall[params.StoragePoolInfo](t, c, "CreateStoragePool", params.CreateStoragePoolArgs{Model: "k8s",
		Name: "fast", Provider: "kubernetes", Attrs: map[string]any{"storage-class": "ssd"}})
	if pool.Name != "fast" || pool.Provider != "kubernetes" || pool.Attrs["storage-class"] != "ssd" {
		t.Errorf("CreateStoragePool = %+v", pool)
	}
	testkit.AdminCall[params.StoragePoolInfo](t, c, "CreateStoragePool", params.CreateStoragePoolArgs{Model: "k8s", Name: "mem", Provider: "tmpfs"})
	pools := testkit.AdminCall[params.StoragePoolsResult](t, c, "StoragePools", params.ModelArgs{Model: "k8s"})
	if len(pools.Pools) != 2 || pools.Pools[0].Name != "fast" || pools.Pools[1].Name != "mem" {
		t.Errorf("StoragePools = %+v", pools)
	}

	var apps params.StringsWatchResult
	e.MustCall("WatchApplications", nil, &apps)
	appsW := client.NewStringsWatcher(e.C, apps.StringsWatcherId)

	app := testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Model: "k8s", Application: "web",
		CharmMetadata: webMeta, Scale: testkit.Ptr(3), Config: map[string]any{"port": 8080.0}, Constraints: "mem=1G",
		Storage: []string{"data=fast,2G", "cache=mem,100M,2"}, Devices: []string{"gpu=2,nvidia.com/gpu"}, Trust: true})
	want := params.ApplicationStatus{Name: "web", Life: "alive", Charm: "local:web-0", Scale: 3, Trust: true,
		Constraints: "mem=1024M", Storage: map[string]string{"data": "fast,1,2048M", "cache": "mem,2,100M"},
		Devices: map[string]string{"gpu": "2,nvidia.com/gpu"}, Units: []params.UnitStatus{}}
	if !reflect.DeepEqual(app, want) {
		t.Errorf("Deploy =\n%+v\nwant\n%+v", app, want)
	}
	ctx, cancel := context.WithTimeout(testkit.Ctx(t), 5*time.Second)
	got, err := appsW.Next(ctx)
	cancel()
	if err != nil || !slices.Equal(got, []string{"web"}) {
		t.Fatalf("applications watcher = %v, %v", got, err)
	}
	// The same metadata again reuses the charm; different metadata under
	// the same name gets the next revision.
	app = testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Model: "k8s", Application: "web2", CharmMetadata: webMeta})
	if app.Charm != "local:web-0" || app.Scale != 1 || app.Storage["data"] != "1,1024M" {
		t.Errorf("second deploy = %+v", app)
	}
	app = testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Model: "k8s", Application: "web3",
		CharmMetadata: "name: web\nsummary: other\n"})
	if app.Charm != "local:web-1" || app.CharmRevision != 1 {
		t.Errorf("third deploy = %+v", app)
	}

	// Each setting fires what the agents watch.
	watch := func(method string) *client.NotifyWatcher {
		var res params.NotifyWatchResults
		e.MustCall(method, testkit.Ents("application-web"), &res)
		if res.Results[0].Error != nil {
			t.Fatalf("%s = %+v", method, res)
		}
		return client.NewNotifyWatcher(e.C, res.Results[0].NotifyWatcherId)
	}
	entity, scale, spec := watch("Watch"), watch("WatchApplicationsScale"), watch("WatchPodSpec")
	var hashes params.StringsWatchResults
	e.MustCall("WatchApplicationsTrustHash", testkit.Ents("application-web"), &hashes)
	hash := client.NewStringsWatcher(e.C, hashes.Results[0].StringsWatcherId)
	hashNext := func() bool {
		ctx, cancel := context.WithTimeout(testkit.Ctx(t), 5*time.Second)
		defer cancel()
		_, err := hash.Next(ctx)
		return err == nil
	}

	app = testkit.AdminCall[params.ApplicationStatus](t, c, "ScaleApplication", params.ScaleArgs{Model: "k8s", Application: "web", Scale: 5})
	if app.Scale != 5 || !testkit.NextWithin(t, scale, 5*time.Second) || !testkit.NextWithin(t, entity, 5*time.Second) {
		t.Errorf("scale: %+v, or the scale and entity watchers did not fire", app)
	}
	app = testkit.AdminCall[params.ApplicationStatus](t, c, "SetApplicationConstraints", params.SetApplicationConstraintsArgs{Model: "k8s",
		Application: "web", Constraints: "mem=2G cores=1"})
	if app.Constraints != "cores=1 mem=2048M" || !testkit.NextWithin(t, entity, 5*time.Second) {
		t.Errorf("constraints: %+v, or the entity watcher did not fire", app)
	}
	cfg := testkit.AdminCall[params.ApplicationConfigInfo](t, c, "SetApplicationConfig", params.SetApplicationConfigArgs{Model: "k8s",
		Application: "web", Config: map[string]any{"name": "x"}, Unset: []string{"port"}})
	if !reflect.DeepEqual(cfg.Config, map[string]any{"name": "x", "trust": true}) || !hashNext() {
		t.Errorf("config: %+v, or the trust hash watcher did not fire", cfg)
	}
	app = testkit.AdminCall[params.ApplicationStatus](t, c, "SetApplicationTrust", params.SetTrustArgs{Model: "k8s", Application: "web"})
	if app.Trust || !hashNext() {
		t.Errorf("trust: %+v, or the trust hash watcher did not fire", app)
	}
	ps := testkit.AdminCall[params.PodSpecResult](t, c, "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web",
		Spec: "containers:\n  - name: web\n    image: nginx\n"})
	if ps.UpgradeCounter != 1 || !testkit.NextWithin(t, spec, 5*time.Second) {
		t.Errorf("pod spec: %+v, or the spec watcher did not fire", ps)
	}
	ps = testkit.AdminCall[params.PodSpecResult](t, c, "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web",
		Spec: "kind: Deployment\n", Raw: true})
	if spec, err := e.St.K8sSpec(t.Context(), e.Model, "web"); ps.UpgradeCounter != 2 || err != nil || spec.RawSpec != "kind: Deployment\n" {
		t.Errorf("raw spec: %+v; stored %+v, %v", ps, spec, err)
	}
	// A spec nested as deep as a spec may be (deepYAML(n) nests n+1).
	ps = testkit.AdminCall[params.PodSpecResult](t, c, "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web",
		Spec: deepYAML(rpc.MaxValueDepth - 1), Raw: true})
	if ps.UpgradeCounter != 3 {
		t.Errorf("raw spec at the depth bound: %+v", ps)
	}

	// Status: the application's pods, addresses and storage once the
	// unit provisioner reports them.
	e.Update(params.UpdateApplicationUnits{ApplicationTag: "application-web", Scale: testkit.Ptr[int](5), Generation: testkit.Ptr[int64](1),
		Units: []params.ApplicationUnitParams{{ProviderId: "web-0", Address: "10.1.0.1", Ports: []string{"80"}, Status: "running",
			Stateful: true, FilesystemInfo: []params.KubernetesFilesystemInfo{{StorageName: "data", Size: 2048, FilesystemId: "pv-0",
				Status: "attached", MountPoint: "/srv/data", Volume: params.KubernetesVolumeInfo{VolumeId: "vol-0", Size: 2048,
					Persistent: true, Status: "attached"}}}}}})
	if err := e.St.UpdateCloudService(t.Context(), e.Model, "web", "svc-web", []state.Address{{Value: "10.2.0.1"}}); err != nil {
		t.Fatal(err)
	}
	st := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{Model: "k8s"})
	if len(st.Applications) != 3 || st.Applications[0].Name != "web" {
		t.Fatalf("Status applications = %+v", st.Applications)
	}
	web := st.Applications[0]
	if web.ProviderID != "svc-web" || !slices.Equal(web.Addresses, []string{"10.2.0.1"}) || len(web.Units) != 1 {
		t.Fatalf("Status web = %+v", web)
	}
	u := web.Units[0]
	if u.Name != "web/0" || u.ProviderID != "web-0" || u.Address != "10.1.0.1" || u.WorkloadStatus.Status == "" ||
		!slices.Contains(u.Storage, "data/0") {
		t.Errorf("Status unit = %+v", u)
	}
	var fsAttached, volAttached bool
	for _, f := range st.Storage.Filesystems {
		if f.ProviderID == "pv-0" && f.Attachment != nil && f.Attachment.Unit == "web/0" && f.Attachment.MountPoint == "/srv/data" {
			fsAttached = true
		}
	}
	for _, v := range st.Storage.Volumes {
		if v.ProviderID == "vol-0" && len(v.Attached) == 1 && v.Attached[0].Unit == "web/0" && v.Persistent {
			volAttached = true
		}
	}
	if !fsAttached || !volAttached || len(st.Storage.Instances) == 0 {
		t.Errorf("Status storage = %+v", st.Storage)
	}

	// A pool in use stays; an unused one goes.
	testkit.WantErrContaining(t, testkit.ModelAdmin(t, c, "RemoveStoragePool", params.RemoveStoragePoolArgs{Model: "k8s", Name: "fast"}, nil),
		`storage pool "fast" in use`, "")
	testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Model: "k8s", Application: "tmp", CharmMetadata: "name: tmp\n"})
	testkit.AdminCall[params.StoragePoolInfo](t, c, "CreateStoragePool", params.CreateStoragePoolArgs{Model: "k8s", Name: "spare", Provider: "rootfs"})
	if p := testkit.AdminCall[params.StoragePoolInfo](t, c, "RemoveStoragePool", params.RemoveStoragePoolArgs{Model: "k8s", Name: "spare"}); p.Provider != "rootfs" {
		t.Errorf("RemoveStoragePool = %+v", p)
	}

	// remove-application: its unit goes at once, its storage detached
	// (Juju's remove-application without --destroy-storage), and it is
	// dead, waiting for its unit provisioner; the lifecycle watcher sees
	// it.
	rm := testkit.AdminCall[params.RemoveApplicationResult](t, c, "RemoveApplication", params.RemoveApplicationArgs{Model: "k8s", Application: "web"})
	if rm.Life != "dead" || rm.Removed || !slices.Equal(rm.RemovedUnits, []string{"web/0"}) || len(rm.Units) != 0 || len(rm.Storage) != 0 {
		t.Errorf("RemoveApplication = %+v", rm)
	}
	for {
		ctx, cancel := context.WithTimeout(testkit.Ctx(t), 5*time.Second)
		got, err := appsW.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("applications watcher: %v", err)
		}
		if slices.Contains(got, "web") {
			break
		}
	}
	rm = testkit.AdminCall[params.RemoveApplicationResult](t, c, "RemoveApplication", params.RemoveApplicationArgs{Model: "k8s", Application: "web"})
	if rm.Life != "dead" || len(rm.RemovedUnits) != 0 {
		t.Errorf("RemoveApplication again = %+v", rm)
	}
	st = testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{Model: "k8s"})
	for _, si := range st.Storage.Instances {
		if si.Unit != "" || si.Owner != "" {
			t.Errorf("storage after remove-application: %+v", si)
		}
	}
}

func TestModelAdminIAASApplications(t *testing.T) {
	d := testkit.Start(t, nil)
	c := testkit.LoginAdmin(t, d, "")
	st := d.State()
	model := d.Credentials().DefaultModelUUID

	testkit.AdminCall[params.StoragePoolInfo](t, c, "CreateStoragePool", params.CreateStoragePoolArgs{Name: "disks", Provider: "loop"})
	app := testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Application: "db", CharmMetadata: dbMeta,
		Constraints: "cores=2", Storage: []string{"disk=disks,5G,2"}, Trust: true})
	if app.Charm != "local:db-0" || app.Scale != 0 || !app.Trust || app.Storage["disk"] != "disks,2,5120M" || len(app.Units) != 0 {
		t.Errorf("Deploy = %+v", app)
	}
	host := testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{})

	// Two units on machine 0, then one on a new machine with the
	// application's constraints and block storage.
	res := testkit.AdminCall[params.AddUnitsResult](t, c, "AddUnits", params.AddUnitsArgs{Application: "db", To: []string{"0", "0"}, Count: 3})
	if !slices.Equal(res.Units, []string{"db/0", "db/1", "db/2"}) || !slices.Equal(res.Machines, []string{"1"}) {
		t.Fatalf("AddUnits = %+v (host %v)", res, host)
	}
	m1, err := st.Machine(t.Context(), model, "1")
	if err != nil {
		t.Fatal(err)
	}
	vols, err := st.MachineVolumes(t.Context(), model, "1")
	if err != nil || m1.Constraints.String() != "cores=2" || len(vols) != 2 || vols[0].Pool != "disks" || vols[0].Size != 5120 {
		t.Errorf("new machine = %+v, volumes %+v, %v", m1, vols, err)
	}
	res = testkit.AdminCall[params.AddUnitsResult](t, c, "AddUnits", params.AddUnitsArgs{Application: "db"})
	if !slices.Equal(res.Units, []string{"db/3"}) || !slices.Equal(res.Machines, []string{"2"}) {
		t.Errorf("AddUnits (no placement) = %+v", res)
	}

	status := testkit.AdminCall[params.ModelStatus](t, c, "Status", params.ModelArgs{})
	if len(status.Applications) != 1 || len(status.Applications[0].Units) != 4 || status.Applications[0].Units[2].Machine != "1" {
		t.Fatalf("Status = %+v", status.Applications)
	}
	if !slices.Equal(status.Machines[0].Units, []string{"db/0", "db/1"}) {
		t.Errorf("machine 0 units = %v", status.Machines[0].Units)
	}
	if len(status.Storage.Volumes) != 4 || status.Storage.Volumes[0].Attached[0].Machine != "1" {
		t.Errorf("Status volumes = %+v", status.Storage.Volumes)
	}

	// db/3 was machine 2's only unit: the machine becomes dying (Juju's
	// destroyHostOps); machine 0 keeps db/0.
	rm := testkit.AdminCall[params.RemoveUnitsResult](t, c, "RemoveUnits", params.RemoveUnitsArgs{Units: []string{"db/1", "db/3", "db/1"}})
	if !slices.Equal(rm.Removed, []string{"db/1", "db/3"}) || !slices.Equal(rm.DyingMachines, []string{"2"}) {
		t.Errorf("RemoveUnits = %+v", rm)
	}
	if us, _ := st.UnitsOnMachine(t.Context(), model, "0"); len(us) != 1 || us[0].Name != "db/0" {
		t.Errorf("units on machine 0 = %+v", us)
	}
	cfg := testkit.AdminCall[params.ApplicationConfigInfo](t, c, "ApplicationConfig", params.ApplicationArgs{Application: "db"})
	if !reflect.DeepEqual(cfg.Config, map[string]any{"trust": true}) {
		t.Errorf("ApplicationConfig = %+v", cfg)
	}
	// An IAAS application goes at once, with its units; their machines,
	// left without a unit, become dying.
	ra := testkit.AdminCall[params.RemoveApplicationResult](t, c, "RemoveApplication", params.RemoveApplicationArgs{Application: "db"})
	if ra.Life != "dead" || !ra.Removed || !slices.Equal(ra.RemovedUnits, []string{"db/0", "db/2"}) ||
		!slices.Equal(ra.DyingMachines, []string{"0", "1"}) {
		t.Errorf("RemoveApplication = %+v", ra)
	}
	if _, err := st.Application(t.Context(), model, "db"); !jujuerrors.Is(err, jujuerrors.NotFound) {
		t.Errorf("application after removal: %v", err)
	}
}

// Bad input: a clear error with a code, and nothing written.
func TestModelAdminApplicationsBadInput(t *testing.T) {
	e := testkit.NewCAAS(t, nil)
	d, st := e.D, e.D.State()
	c := testkit.LoginAdmin(t, d, "")
	model := d.Credentials().DefaultModelUUID
	testkit.AdminCall[params.StoragePoolInfo](t, c, "CreateStoragePool", params.CreateStoragePoolArgs{Model: "k8s", Name: "fast", Provider: "kubernetes"})
	testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Model: "k8s", Application: "web", CharmMetadata: webMeta,
		Storage: []string{"data=fast"}})
	testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Application: "db", CharmMetadata: dbMeta})
	testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Application: "sub", CharmMetadata: "name: sub\nsubordinate: true\n"})
	testkit.AdminCall[params.ApplicationStatus](t, c, "Deploy", params.DeployArgs{Model: "k8s", Application: "gone", CharmMetadata: "name: gone\n"})
	testkit.AdminCall[params.RemoveApplicationResult](t, c, "RemoveApplication", params.RemoveApplicationArgs{Model: "k8s", Application: "gone"})
	testkit.AdminCall[params.AddMachinesResult](t, c, "AddMachines", params.AddMachinesArgs{Count: 2})
	testkit.AdminCall[params.AddUnitsResult](t, c, "AddUnits", params.AddUnitsArgs{Application: "db", To: []string{"0"}})
	testkit.AdminCall[params.RemoveMachinesResult](t, c, "RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"1"}})
	if _, err := st.AddCAASUnit(t.Context(), e.Model, "web", state.CAASUnitParams{}); err != nil {
		t.Fatal(err)
	}
	testkit.AdminCall[params.ModelSummary](t, c, "AddModel", params.AddModelArgs{Name: "going"})
	going := mustModel(t, d, "going")
	if _, err := st.AddMachine(t.Context(), going.UUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	testkit.AdminCall[params.RemoveModelResult](t, c, "RemoveModel", params.RemoveModelArgs{Model: "going"})
	_ = model

	k8s := func(args params.DeployArgs) params.DeployArgs {
		args.Model = "k8s"
		if args.Application == "" {
			args.Application = "new"
		}
		if args.CharmMetadata == "" {
			args.CharmMetadata = webMeta
		}
		return args
	}
	iaas := func(args params.DeployArgs) params.DeployArgs {
		if args.Application == "" {
			args.Application = "new"
		}
		if args.CharmMetadata == "" {
			args.CharmMetadata = dbMeta
		}
		return args
	}
	const nf, nv, ns, ae = "not found", "not valid", "not supported", "already exists"
	runBadInput(t, d, c, []badInputCase{
		// Deploy
		{"deploy unknown model", "Deploy", params.DeployArgs{Model: "nope", Application: "x", CharmMetadata: "name: x"}, `model "nope" not found`, nf},
		{"deploy invalid name", "Deploy", k8s(params.DeployArgs{Application: "Web_1"}), `application name "Web_1" not valid`, nv},
		{"deploy duplicate", "Deploy", k8s(params.DeployArgs{Application: "web"}), `application "web" already exists`, ae},
		{"deploy duplicate iaas", "Deploy", iaas(params.DeployArgs{Application: "db"}), `application "db" already exists`, ae},
		{"deploy duplicate dead", "Deploy", k8s(params.DeployArgs{Application: "gone"}), `application "gone" already exists`, ae},
		{"deploy empty metadata", "Deploy", params.DeployArgs{Model: "k8s", Application: "x", CharmMetadata: " \n"}, "charm metadata is empty", nv},
		{"deploy bad yaml", "Deploy", k8s(params.DeployArgs{CharmMetadata: "name: x\nsummary: [a\n"}), "metadata.yaml line", nv},
		{"deploy bad storage type", "Deploy", k8s(params.DeployArgs{CharmMetadata: "name: x\nstorage:\n  data:\n    type: tape\n"}),
			`metadata.yaml line 4: storage "data"`, nv},
		{"deploy no name", "Deploy", k8s(params.DeployArgs{CharmMetadata: "summary: x\n"}), "metadata.yaml", nv},
		{"deploy unknown pool", "Deploy", k8s(params.DeployArgs{Storage: []string{"data=nope,1G"}}), `storage "data": pool "nope" not found`, nf},
		{"deploy undeclared storage", "Deploy", k8s(params.DeployArgs{Storage: []string{"logs=fast"}}), `storage "logs" (charm "web" has no such storage)`, nv},
		{"deploy storage syntax", "Deploy", k8s(params.DeployArgs{Storage: []string{"data=fast,ten"}}), `cannot parse constraints for storage "data"`, nv},
		{"deploy storage twice", "Deploy", k8s(params.DeployArgs{Storage: []string{"data=fast", "data=1G"}}), `data`, nv},
		{"deploy storage count", "Deploy", k8s(params.DeployArgs{Storage: []string{"cache=fast,5"}}), `storage "cache" count 5 (charm allows 0 to 4)`, nv},
		{"deploy iaas unknown pool", "Deploy", iaas(params.DeployArgs{Storage: []string{"disk=nope"}}), `storage "disk": pool "nope" not found`, nf},
		{"deploy iaas filesystem pool for block", "Deploy", iaas(params.DeployArgs{Storage: []string{"disk=tmpfs"}}), `pool "tmpfs" (provider tmpfs) for block storage not valid`, nv},
		{"deploy negative scale", "Deploy", k8s(params.DeployArgs{Scale: testkit.Ptr(-1)}), "application scale -1 not valid", nv},
		{"deploy scale on iaas", "Deploy", iaas(params.DeployArgs{Scale: testkit.Ptr(2)}), `model "default" is an iaas model: scale is for caas applications`, nv},
		{"deploy devices on iaas", "Deploy", iaas(params.DeployArgs{Devices: []string{"gpu=1,x"}}), "devices are for caas applications", ns},
		{"deploy k8s charm on iaas", "Deploy", iaas(params.DeployArgs{CharmMetadata: webMeta}), `charm "web" is a kubernetes charm`, ns},
		{"deploy subordinate on caas", "Deploy", k8s(params.DeployArgs{CharmMetadata: "name: s\nsubordinate: true\n"}), "caas models take no subordinates", ns},
		{"deploy unknown device", "Deploy", k8s(params.DeployArgs{Devices: []string{"tpu=1,x"}}), `device "tpu": charm "web" has no such device`, nv},
		{"deploy device count", "Deploy", k8s(params.DeployArgs{Devices: []string{"gpu=3,nvidia.com/gpu"}}), `device "gpu" count 3 (charm allows 1 to 2)`, nv},
		{"deploy device syntax", "Deploy", k8s(params.DeployArgs{Devices: []string{"gpu"}}), `device "gpu" not valid: want NAME=[COUNT,]TYPE`, nv},
		{"deploy device zero", "Deploy", k8s(params.DeployArgs{Devices: []string{"gpu=0,x"}}), "count 0 is not positive", nv},
		{"deploy bad constraints", "Deploy", k8s(params.DeployArgs{Constraints: "mem=lots"}), `bad "mem" constraint`, nv},
		{"deploy unknown space", "Deploy", k8s(params.DeployArgs{Constraints: "spaces=nope"}), `space "nope" not found`, nf},
		{"deploy bad config key", "Deploy", k8s(params.DeployArgs{Config: map[string]any{"a b": 1.0}}), `config key "a b" not valid`, nv},
		{"deploy trust not bool", "Deploy", k8s(params.DeployArgs{Config: map[string]any{"trust": "yes"}}), "trust yes (want a bool) not valid", nv},
		{"deploy metadata too long", "Deploy", k8s(params.DeployArgs{CharmMetadata: "name: web\ndescription: " + strings.Repeat("x", modeladmin.MaxCharmMetadata)}),
			"charm metadata is longer than 1048576 bytes", nv},
		{"deploy dying model", "Deploy", params.DeployArgs{Model: "going", Application: "x", CharmMetadata: "name: x\n"}, `adding an application to dying model "going"`, nv},
		// AddUnits
		{"add-unit unknown app", "AddUnits", params.AddUnitsArgs{Application: "nope"}, `application "nope" not found`, nf},
		{"add-unit unknown model", "AddUnits", params.AddUnitsArgs{Model: "nope", Application: "db"}, `model "nope" not found`, nf},
		{"add-unit caas", "AddUnits", params.AddUnitsArgs{Model: "k8s", Application: "web"}, "its units follow the application's scale", ns},
		{"add-unit unknown machine", "AddUnits", params.AddUnitsArgs{Application: "db", To: []string{"0", "9"}}, "machine 9 not found", nf},
		{"add-unit bad machine", "AddUnits", params.AddUnitsArgs{Application: "db", To: []string{"zero"}}, `machine id "zero" not valid`, nv},
		{"add-unit dying machine", "AddUnits", params.AddUnitsArgs{Application: "db", To: []string{"1"}}, "machine 1 is dying", nv},
		{"add-unit count", "AddUnits", params.AddUnitsArgs{Application: "db", Count: 101}, "count 101: want 1 to 100", nv},
		{"add-unit negative count", "AddUnits", params.AddUnitsArgs{Application: "db", Count: -1}, "count -1: want 1 to 100", nv},
		{"add-unit placements", "AddUnits", params.AddUnitsArgs{Application: "db", To: []string{"0", "0"}, Count: 1}, "2 placements for 1 units", nv},
		{"add-unit subordinate", "AddUnits", params.AddUnitsArgs{Application: "sub"}, "its units come with its principals", ns},
		// RemoveUnits
		{"remove-unit none", "RemoveUnits", params.RemoveUnitsArgs{}, "no units given", nv},
		{"remove-unit bad name", "RemoveUnits", params.RemoveUnitsArgs{Units: []string{"db"}}, `unit name "db" not valid`, nv},
		{"remove-unit unknown", "RemoveUnits", params.RemoveUnitsArgs{Units: []string{"db/0", "db/9"}}, `unit "db/9" not found`, nf},
		{"remove-unit caas", "RemoveUnits", params.RemoveUnitsArgs{Model: "k8s", Units: []string{"web/0"}}, "change its scale instead", ns},
		// ScaleApplication
		{"scale iaas", "ScaleApplication", params.ScaleArgs{Application: "db", Scale: 2}, "add and remove units instead of scaling", ns},
		{"scale negative", "ScaleApplication", params.ScaleArgs{Model: "k8s", Application: "web", Scale: -1}, "application scale -1 not valid", nv},
		{"scale unknown app", "ScaleApplication", params.ScaleArgs{Model: "k8s", Application: "nope", Scale: 1}, `application "nope" not found`, nf},
		{"scale no app", "ScaleApplication", params.ScaleArgs{Model: "k8s", Scale: 1}, "application name is required", nv},
		// config, trust, constraints
		{"config unknown app", "ApplicationConfig", params.ApplicationArgs{Application: "nope"}, `application "nope" not found`, nf},
		{"set config unknown app", "SetApplicationConfig", params.SetApplicationConfigArgs{Application: "nope", Config: map[string]any{"a": "b"}}, `application "nope" not found`, nf},
		{"set config bad key", "SetApplicationConfig", params.SetApplicationConfigArgs{Application: "db", Config: map[string]any{"1a": "b"}}, `config key "1a" not valid`, nv},
		{"set config trust", "SetApplicationConfig", params.SetApplicationConfigArgs{Application: "db", Config: map[string]any{"trust": 1.0}}, "trust 1 (want a bool) not valid", nv},
		{"set config set and unset", "SetApplicationConfig", params.SetApplicationConfigArgs{Application: "db", Config: map[string]any{"a": "b"}, Unset: []string{"a"}}, `config key "a" is both set and unset`, nv},
		{"set config list", "SetApplicationConfig", params.SetApplicationConfigArgs{Application: "db", Config: map[string]any{"a": []any{1.0}}}, "is not a string, number or boolean", nv},
		{"trust unknown app", "SetApplicationTrust", params.SetTrustArgs{Application: "nope", Trust: true}, `application "nope" not found`, nf},
		{"constraints unknown app", "SetApplicationConstraints", params.SetApplicationConstraintsArgs{Application: "nope"}, `application "nope" not found`, nf},
		{"constraints bad", "SetApplicationConstraints", params.SetApplicationConstraintsArgs{Application: "db", Constraints: "colour=red"}, `unknown constraint "colour"`, nv},
		{"application unknown", "Application", params.ApplicationArgs{Model: "k8s", Application: "nope"}, `application "nope" not found`, nf},
		// SetPodSpec
		{"pod spec bad yaml", "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web", Spec: "containers: [a\n"}, "pod spec is not valid YAML: yaml: line", nv},
		{"pod spec not a mapping", "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web", Spec: "- a\n"}, "pod spec is not a YAML mapping", nv},
		{"raw spec empty", "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web", Raw: true}, "raw k8s spec is empty", nv},
		{"pod spec iaas", "SetPodSpec", params.SetPodSpecArgs{Application: "db", Spec: "a: b"}, "pod specs are for caas applications", ns},
		{"pod spec unknown app", "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "nope", Spec: "a: b"}, `application "nope" not found`, nf},
		{"pod spec too deep", "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web", Spec: deepYAML(rpc.MaxValueDepth + 1)},
			"pod spec is nested deeper than 64 mappings and sequences (limit 64)", nv},
		{"raw spec too deep", "SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web", Raw: true, Spec: "a: " + strings.Repeat("[", 100) + strings.Repeat("]", 100)},
			"raw k8s spec is nested deeper than 64", nv},
		// RemoveApplication
		{"remove-application unknown", "RemoveApplication", params.ApplicationArgs{Application: "nope"}, `application "nope" not found`, nf},
		{"remove-application bad name", "RemoveApplication", params.ApplicationArgs{Application: "db/0"}, `application name "db/0" not valid`, nv},
		{"remove-application unknown model", "RemoveApplication", params.ApplicationArgs{Model: "nope", Application: "db"}, `model "nope" not found`, nf},
		// storage pools
		{"pool duplicate", "CreateStoragePool", params.CreateStoragePoolArgs{Model: "k8s", Name: "fast", Provider: "tmpfs"}, `pool "fast" already exists`, ae},
		{"pool bad name", "CreateStoragePool", params.CreateStoragePoolArgs{Name: "Fast!", Provider: "loop"}, `pool name "Fast!" not valid`, nv},
		{"pool unknown provider", "CreateStoragePool", params.CreateStoragePoolArgs{Name: "x", Provider: "nfs-magic"}, `storage provider "nfs-magic" not found`, nf},
		{"pool kubernetes on iaas", "CreateStoragePool", params.CreateStoragePoolArgs{Name: "x", Provider: "kubernetes"}, `storage provider "kubernetes" not found`, nf},
		{"pool bad attrs", "CreateStoragePool", params.CreateStoragePoolArgs{Model: "k8s", Name: "x", Provider: "kubernetes",
			Attrs: map[string]any{"storage-provisioner": "p"}}, "validating storage provider config", nv},
		{"pool attr list", "CreateStoragePool", params.CreateStoragePoolArgs{Name: "x", Provider: "loop", Attrs: map[string]any{"a": []any{}}}, "pool attributes", nv},
		{"pool dying model", "CreateStoragePool", params.CreateStoragePoolArgs{Model: "going", Name: "x", Provider: "loop"}, `dying model "going"`, nv},
		{"pool unknown model", "StoragePools", params.ModelArgs{Model: "nope"}, `model "nope" not found`, nf},
		{"remove pool unknown", "RemoveStoragePool", params.RemoveStoragePoolArgs{Name: "nope"}, `storage pool "nope" not found`, nf},
		{"remove pool in use", "RemoveStoragePool", params.RemoveStoragePoolArgs{Model: "k8s", Name: "fast"}, `storage pool "fast" in use`, ""},
	})
}

func mustModel(t *testing.T, d interface{ State() *state.State }, name string) state.Model {
	t.Helper()
	m, err := d.State().ModelByName(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// deepYAML is a YAML mapping nested depth mappings deep, in block style.
func deepYAML(depth int) string {
	var b strings.Builder
	for i := range depth {
		b.WriteString(strings.Repeat("  ", i) + "a:\n")
	}
	b.WriteString(strings.Repeat("  ", depth) + "b: c\n")
	return b.String()
}
