package state_test

import (
	"errors"
	"fmt"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/storage"
)

func caasModel(t *testing.T) (*state.State, string) {
	st := statetest.New(t)
	m := statetest.AddModel(t, st, "k8s", state.ModelTypeCAAS)
	return st, m.UUID
}

func TestStoragePools(t *testing.T) {
	st, model := caasModel(t)
	mgr, err := st.StorageManager(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Create("fast", storage.ProviderKubernetes, map[string]any{"storage-class": "ssd"}); err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.Create("fast", storage.ProviderTmpfs, nil); !errors.Is(err, jujuerrors.AlreadyExists) {
		t.Errorf("duplicate create = %v", err)
	}
	if _, err := mgr.Create("bad", storage.ProviderKubernetes, map[string]any{"storage-provisioner": "x"}); !errors.Is(err, jujuerrors.NotValid) {
		t.Errorf("invalid attrs = %v", err)
	}
	if _, err := mgr.Create("mem", storage.ProviderTmpfs, nil); err != nil {
		t.Fatal(err)
	}
	pools, err := mgr.List()
	if err != nil || len(pools) != 2 || pools[0].Name != "fast" || pools[0].Attrs["storage-class"] != "ssd" || pools[1].Name != "mem" {
		t.Fatalf("List = %+v, %v", pools, err)
	}
	if cfg, err := mgr.Get("rootfs"); err != nil || cfg.Provider != storage.ProviderRootfs {
		t.Errorf("Get(rootfs) = %+v, %v", cfg, err)
	}
	if _, err := mgr.Get("nope"); err == nil || err.Error() != `pool "nope" not found` {
		t.Errorf("Get(nope) = %v", err)
	}
	// A pool in use by storage constraints is kept.
	meta, _ := charm.ParseMeta([]byte("name: db\nstorage:\n  data:\n    type: filesystem\n"))
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "db", Charm: state.Charm{URL: "ch:db", Meta: meta},
		Storage: map[string]storage.Constraints{"data": {Pool: "fast"}}}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Remove("fast"); err == nil || err.Error() != `deleting pool "fast": storage pool "fast" in use` {
		t.Errorf("Remove(in use) = %v", err)
	}
	if err := mgr.Remove("mem"); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Remove("mem"); err == nil || err.Error() != `storage pool "mem" not found` {
		t.Errorf("Remove(missing) = %v", err)
	}
	// Pools are per model and survive a reopen (they are in bbolt).
	other := statetest.AddModel(t, st, "k8s2", state.ModelTypeCAAS)
	if pools, _ := st.PoolStore(t.Context(), other.UUID).ListPools(); len(pools) != 0 {
		t.Errorf("other model pools = %+v", pools)
	}
}

func TestAddCAASApplication(t *testing.T) {
	st, model := caasModel(t)
	meta, err := charm.ParseMeta([]byte(`
name: db
storage:
  data:
    type: filesystem
    minimum-size: 2G
  logs:
    type: filesystem
    multiple:
      range: 0-2
  raw:
    type: block
    multiple:
      range: 0-1
devices:
  gpu:
    type: nvidia.com/gpu
`))
	if err != nil {
		t.Fatal(err)
	}
	ch := state.Charm{URL: "ch:db-1", Meta: meta}
	for _, tt := range []struct {
		name string
		p    state.CAASApplicationParams
		err  string
	}{
		{"bad name", state.CAASApplicationParams{Name: "Db", Charm: ch}, `application name "Db" not valid`},
		{"no charm", state.CAASApplicationParams{Name: "db"}, `application "db" without charm metadata not valid`},
		{"negative scale", state.CAASApplicationParams{Name: "db", Charm: ch, Scale: -1}, `application scale -1 not valid`},
		{"unknown storage", state.CAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"nope": {}}},
			`storage "nope" (charm "db" has no such storage) not valid`},
		{"block storage", state.CAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"raw": {Count: 1}}},
			`block storage "raw" on kubernetes not supported`},
		{"too many", state.CAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"logs": {Count: 3}}},
			`storage "logs" count 3 (charm allows 0 to 2) not valid`},
		{"too small", state.CAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"data": {Size: 10}}},
			`storage "data" size 10M (charm needs at least 2048M) not valid`},
		{"unknown pool", state.CAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"data": {Pool: "nope"}}},
			`storage "data": pool "nope" not found`},
		{"loop pool", state.CAASApplicationParams{Name: "db", Charm: ch, Storage: map[string]storage.Constraints{"data": {Pool: "loop"}}},
			`storage "data": storage provider "loop" not valid`},
		{"unknown device", state.CAASApplicationParams{Name: "db", Charm: ch, Devices: map[string]state.DeviceConstraints{"tpu": {Type: "x", Count: 1}}},
			`device "tpu" (charm "db" has no such device) not valid`},
		{"bad trust", state.CAASApplicationParams{Name: "db", Charm: ch, Config: map[string]any{"trust": "yes"}}, `trust yes (want a bool) not valid`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rev := st.Revision()
			if _, err := st.AddCAASApplication(t.Context(), model, tt.p); err == nil || err.Error() != tt.err {
				t.Fatalf("err = %v\nwant  %s", err, tt.err)
			}
			if st.Revision() != rev {
				t.Error("a refused deploy wrote")
			}
		})
	}
	a, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "db", Charm: ch, Scale: 2, Trust: true,
		Storage: map[string]storage.Constraints{"data": {Pool: "tmpfs"}}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Scale != 2 || !a.HasResources || a.StorageConstraints["data"] != (storage.Constraints{Pool: "tmpfs", Size: 2048, Count: 1}) {
		t.Errorf("application = %+v", a)
	}
	if cfg, _ := st.ApplicationConfig(t.Context(), model, "db"); cfg["trust"] != true {
		t.Errorf("config = %v", cfg)
	}
	// A tmpfs filesystem has no backing volume.
	u, err := st.AddCAASUnit(t.Context(), model, "db", state.CAASUnitParams{})
	if err != nil {
		t.Fatal(err)
	}
	fss, _ := st.Filesystems(t.Context(), model)
	if len(fss) != 1 || fss[0].VolumeID != "" || fss[0].Attachment.Unit != u.Name || fss[0].Attachment.Location != "/var/lib/juju/storage/data/0" {
		t.Errorf("filesystems = %+v", fss)
	}
	// IAAS models refuse CAAS applications.
	if _, err := st.AddCAASApplication(t.Context(), statetest.DefaultModelUUID, state.CAASApplicationParams{Name: "x", Charm: ch}); !errors.Is(err, jujuerrors.NotSupported) {
		t.Errorf("IAAS deploy = %v", err)
	}
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "db", Charm: ch}); !errors.Is(err, jujuerrors.AlreadyExists) {
		t.Errorf("duplicate = %v", err)
	}
	// Scale: negative refused; operator scale protects.
	if err := st.SetApplicationScale(t.Context(), model, "db", -2); err == nil {
		t.Error("negative scale accepted")
	}
	if err := st.SetApplicationScale(t.Context(), model, "db", 4); err != nil {
		t.Fatal(err)
	}
	if cs, _ := st.CloudService(t.Context(), model, "db"); !cs.DesiredScaleProtected {
		t.Errorf("cloud service = %+v", cs)
	}
	// Pod spec.
	if _, err := st.K8sSpec(t.Context(), model, "db"); err == nil || err.Error() != "k8s spec for application db not found" {
		t.Errorf("K8sSpec = %v", err)
	}
	if err := st.SetPodSpec(t.Context(), model, "db", "spec"); err != nil {
		t.Fatal(err)
	}
	if s, _ := st.K8sSpec(t.Context(), model, "db"); s.Spec != "spec" || s.UpgradeCounter != 1 {
		t.Errorf("K8sSpec = %+v", s)
	}
}

// The unit info of UpdateCAASUnits names every unit of the model holding a
// reported provider id (Juju's Model.Containers is model-wide), including
// ids that JSON escapes.
func TestUpdateCAASUnitsInfoIsModelWide(t *testing.T) {
	st, model := caasModel(t)
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"a", "b", "c"} {
		if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: app,
			Charm: state.Charm{URL: "local:web-0", Meta: meta}, Scale: 2}); err != nil {
			t.Fatal(err)
		}
	}
	two := 2
	odd := `pod<&>"é\x`
	update := func(app string, ids ...string) []state.UnitInfo {
		t.Helper()
		var pods []state.Pod
		for _, id := range ids {
			pods = append(pods, state.Pod{ProviderID: id, Status: "running"})
		}
		info, err := st.UpdateCAASUnits(t.Context(), model, app, state.UnitsUpdate{Scale: &two, Pods: pods})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	// New pods get units in provider id order.
	if got := update("a", odd, "a-1"); len(got) != 2 || got[0] != (state.UnitInfo{ProviderID: odd, Unit: "a/1"}) ||
		got[1] != (state.UnitInfo{ProviderID: "a-1", Unit: "a/0"}) {
		t.Fatalf("a: info = %+v", got)
	}
	update("c", "c-0")
	// b reports a pod whose id a's unit holds too: both units are named.
	got := update("b", "b-0", odd)
	want := []state.UnitInfo{{ProviderID: "b-0", Unit: "b/0"}, {ProviderID: odd, Unit: "a/1"}, {ProviderID: odd, Unit: "b/1"}}
	if len(got) != len(want) {
		t.Fatalf("b: info = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("b: info = %+v, want %+v", got, want)
		}
	}
	// No provider id reported: no info.
	if got := update("c"); got != nil {
		t.Errorf("c without pods: info = %+v", got)
	}
}

// Units and applications are decoded through caches of decoded records
// (record_cache.go). What a read returns must still be what the database
// holds at the read, and each caller's own copy, through every path that
// reads them: Unit, CAASUnits, Application and the updates' own reads.
func TestUnitAndApplicationReadsAreCurrentAndPrivate(t *testing.T) {
	st, model := caasModel(t)
	meta, err := charm.ParseMeta([]byte("name: web\ndevices:\n  gpu:\n    type: nvidia.com/gpu\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddCAASApplication(t.Context(), model, state.CAASApplicationParams{Name: "web",
		Charm: state.Charm{URL: "local:web-0", Meta: meta}, Scale: 1,
		Devices: map[string]state.DeviceConstraints{"gpu": {Type: "nvidia.com/gpu", Count: 1, Attributes: map[string]string{"a": "b"}}}}); err != nil {
		t.Fatal(err)
	}
	one := 1
	report := func(info string, data map[string]any) {
		t.Helper()
		if _, err := st.UpdateCAASUnits(t.Context(), model, "web", state.UnitsUpdate{Scale: &one, Pods: []state.Pod{
			{ProviderID: "p-0", Address: "10.0.0.1", Ports: []string{"80/tcp"}, Status: "running", Info: info, Data: data}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 { // the records are kept from their second read on
		report(fmt.Sprint("up ", i), map[string]any{"n": float64(i), "deep": map[string]any{"k": "v"}})
	}
	for range 3 {
		u, err := st.Unit(t.Context(), model, "web/0")
		if err != nil || u.ContainerStatus.Message != "up 2" || u.ContainerStatus.Data["deep"].(map[string]any)["k"] != "v" ||
			u.Container.Ports[0] != "80/tcp" {
			t.Fatalf("Unit = %+v, %v", u, err)
		}
		u.Container.Ports[0] = "scribbled"
		u.ContainerStatus.Data["deep"].(map[string]any)["k"] = "scribbled"
		us, err := st.CAASUnits(t.Context(), model, "web")
		if err != nil || len(us) != 1 || us[0].Container.Ports[0] != "80/tcp" || us[0].ContainerStatus.Data["deep"].(map[string]any)["k"] != "v" {
			t.Fatalf("CAASUnits = %+v, %v", us, err)
		}
		us[0].Container.Address = "scribbled"
		a, err := st.Application(t.Context(), model, "web")
		if err != nil || a.Scale != 1 || a.DeviceConstraints["gpu"].Attributes["a"] != "b" {
			t.Fatalf("Application = %+v, %v", a, err)
		}
		a.DeviceConstraints["gpu"].Attributes["a"] = "scribbled"
		a.Scale = 7
	}
	// Every write is seen by the next read, the updates' own included.
	report("up 3", nil)
	if u, _ := st.Unit(t.Context(), model, "web/0"); u.ContainerStatus.Message != "up 3" || u.ContainerStatus.Data != nil || u.Container.Address != "10.0.0.1" {
		t.Errorf("after a fourth report: %+v", u.CAASUnit)
	}
	if err := st.SetApplicationScale(t.Context(), model, "web", 2); err != nil {
		t.Fatal(err)
	}
	if a, _ := st.Application(t.Context(), model, "web"); a.Scale != 2 || a.DeviceConstraints["gpu"].Attributes["a"] != "b" {
		t.Errorf("after SetApplicationScale: %+v", a.CAASApplication)
	}
	if us, _ := st.CAASUnits(t.Context(), model, "web"); len(us) != 1 || us[0].ContainerStatus.Message != "up 3" {
		t.Errorf("CAASUnits after the writes: %+v", us)
	}
}
