package storage_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
)

func newManager(t *testing.T) *storage.Manager {
	t.Helper()
	return storage.NewManager(&storage.MemPoolStore{}, storage.KubernetesRegistry())
}

func TestManagerCreateValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		pool     string
		provider storage.ProviderType
		attrs    map[string]any
		err      string
		kind     error
	}{
		{name: "kubernetes pool", pool: "fast", provider: "kubernetes", attrs: map[string]any{"storage-class": "ssd"}},
		{name: "tmpfs pool", pool: "ram", provider: "tmpfs"},
		{name: "pool named like a provider", pool: "loop", provider: "rootfs"},
		{name: "environ scoped persistent", pool: "keep", provider: "kubernetes", attrs: map[string]any{"persistent": true}},
		{name: "persistent false on machine scope", pool: "p", provider: "loop", attrs: map[string]any{"persistent": "false"}},
		{name: "missing name", pool: "", provider: "loop", err: "pool name is missing", kind: errors.NotValid},
		{name: "bad name", pool: "7ool", provider: "loop", err: `pool name "7ool" not valid`, kind: errors.NotValid},
		{name: "bad name underscore", pool: "my_pool", provider: "loop", err: `pool name "my_pool" not valid`, kind: errors.NotValid},
		{name: "missing provider", pool: "p", provider: "", err: "provider type is missing", kind: errors.NotValid},
		{name: "unknown provider", pool: "p", provider: "ebs", err: `storage provider "ebs" not found`, kind: errors.NotFound},
		{name: "persistent not a bool", pool: "p", provider: "kubernetes", attrs: map[string]any{"persistent": "maybe"},
			err: `validating common storage config: persistent: expected bool, got string("maybe")`, kind: errors.NotValid},
		{name: "persistent on machine scope", pool: "p", provider: "tmpfs", attrs: map[string]any{"persistent": true},
			err: `machine scoped storage provider "p" does not support persistent storage`, kind: errors.NotValid},
		{name: "provider refuses attributes", pool: "p", provider: "kubernetes", attrs: map[string]any{"storage-provisioner": "x"},
			err: "validating storage provider config: storage-class must be specified if storage-provisioner is specified", kind: errors.NotValid},
		{name: "provider refuses mode", pool: "p", provider: "kubernetes", attrs: map[string]any{"storage-mode": "x"},
			err: `validating storage provider config: storage mode "x" not supported`, kind: errors.NotSupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t)
			cfg, err := m.Create(tc.pool, tc.provider, tc.attrs)
			checkErr(t, err, tc.err, tc.kind)
			if err != nil {
				if pools, _ := m.List(); len(pools) != 0 {
					t.Fatalf("invalid pool stored: %v", pools)
				}
				return
			}
			want := storage.Config{Name: tc.pool, Provider: tc.provider, Attrs: tc.attrs}
			if !reflect.DeepEqual(cfg, want) {
				t.Fatalf("Create = %+v, want %+v", cfg, want)
			}
			got, err := m.Pool(tc.pool)
			checkErr(t, err, "", nil)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Pool = %+v, want %+v", got, want)
			}
		})
	}
}

func TestManagerCreateDuplicate(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	_, err := m.Create("fast", "kubernetes", map[string]any{"storage-class": "ssd"})
	checkErr(t, err, "", nil)
	_, err = m.Create("fast", "tmpfs", nil)
	checkErr(t, err, `creating pool "fast": pool "fast" already exists`, errors.AlreadyExists)
	got, _ := m.Pool("fast")
	if got.Provider != "kubernetes" {
		t.Fatalf("duplicate create changed the pool: %+v", got)
	}
}

func TestManagerCreateConcurrent(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = m.Create("same", "tmpfs", map[string]any{"i": i}) })
	}
	wg.Wait()
	created := 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case !errors.Is(err, errors.AlreadyExists):
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if created != 1 {
		t.Fatalf("%d creates succeeded, want 1", created)
	}
}

func TestManagerCopies(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	attrs := map[string]any{"storage-class": "ssd"}
	cfg, err := m.Create("fast", "kubernetes", attrs)
	checkErr(t, err, "", nil)
	attrs["storage-class"] = "changed by caller"
	cfg.Attrs["storage-class"] = "changed via result"
	got, _ := m.Get("fast")
	got.Attrs["storage-class"] = "changed via Get"
	again, _ := m.Get("fast")
	if again.Attrs["storage-class"] != "ssd" {
		t.Fatalf("stored attributes changed: %v", again.Attrs)
	}
}

func TestManagerGet(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	mustCreate(t, m, "fast", "kubernetes", map[string]any{"storage-class": "ssd"})
	mustCreate(t, m, "tmpfs", "rootfs", map[string]any{"x": "y"}) // a pool hides the provider of its name
	tests := []struct {
		name string
		want storage.Config
		err  string
	}{
		{name: "fast", want: storage.Config{Name: "fast", Provider: "kubernetes", Attrs: map[string]any{"storage-class": "ssd"}}},
		{name: "tmpfs", want: storage.Config{Name: "tmpfs", Provider: "rootfs", Attrs: map[string]any{"x": "y"}}},
		{name: "loop", want: storage.Config{Name: "loop", Provider: "loop"}},
		{name: "kubernetes", want: storage.Config{Name: "kubernetes", Provider: "kubernetes"}},
		{name: "slow", err: `pool "slow" not found`},
		{name: "", err: `pool "" not found`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Get(tc.name)
			checkErr(t, err, tc.err, errors.NotFound)
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Get(%q) = %+v, want %+v", tc.name, got, tc.want)
			}
		})
	}
	// Pool is the store only.
	_, err := m.Pool("loop")
	checkErr(t, err, `pool "loop" not found`, errors.NotFound)
}

func TestManagerResolve(t *testing.T) {
	t.Parallel()
	store := &storage.MemPoolStore{}
	// A pool whose provider the registry no longer has (written directly).
	checkErr(t, store.PutPool(storage.Config{Name: "old", Provider: "ebs"}, false), "", nil)
	m := storage.NewManager(store, storage.KubernetesRegistry())
	mustCreate(t, m, "ram", "tmpfs", nil)

	cfg, p, err := m.Resolve("ram")
	checkErr(t, err, "", nil)
	if cfg.Provider != "tmpfs" || p.Type() != "tmpfs" {
		t.Fatalf("Resolve(ram) = %+v, %v", cfg, p.Type())
	}
	cfg, p, err = m.Resolve("loop")
	checkErr(t, err, "", nil)
	if cfg.Attrs != nil || p.Type() != "loop" || !p.Supports(storage.KindBlock) {
		t.Fatalf("Resolve(loop) = %+v, %v", cfg, p.Type())
	}
	_, _, err = m.Resolve("old")
	checkErr(t, err, `pool "old": storage provider "ebs" not found`, errors.NotFound)
	_, _, err = m.Resolve("nope")
	checkErr(t, err, `pool "nope" not found`, errors.NotFound)
}

func TestManagerListSorted(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	pools, err := m.List()
	checkErr(t, err, "", nil)
	if len(pools) != 0 {
		t.Fatalf("new manager lists %v", pools)
	}
	for _, name := range []string{"zeta", "alpha", "Mid", "beta"} {
		mustCreate(t, m, name, "tmpfs", nil)
	}
	pools, err = m.List()
	checkErr(t, err, "", nil)
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	if want := []string{"Mid", "alpha", "beta", "zeta"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("List names = %v, want %v", names, want)
	}
}

// unsortedStore lists pools in reverse, to show the Manager sorts.
type unsortedStore struct{ storage.MemPoolStore }

func (s *unsortedStore) ListPools() ([]storage.Config, error) {
	pools, err := s.MemPoolStore.ListPools()
	for i, j := 0, len(pools)-1; i < j; i, j = i+1, j-1 {
		pools[i], pools[j] = pools[j], pools[i]
	}
	return pools, err
}

func TestManagerListSortsStoreOrder(t *testing.T) {
	t.Parallel()
	m := storage.NewManager(&unsortedStore{}, storage.KubernetesRegistry())
	mustCreate(t, m, "a", "tmpfs", nil)
	mustCreate(t, m, "b", "tmpfs", nil)
	pools, _ := m.List()
	if pools[0].Name != "a" || pools[1].Name != "b" {
		t.Fatalf("List = %v", pools)
	}
}

func TestManagerRemove(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	mustCreate(t, m, "fast", "kubernetes", nil)
	checkErr(t, m.Remove("fast"), "", nil)
	_, err := m.Pool("fast")
	checkErr(t, err, `pool "fast" not found`, errors.NotFound)
	checkErr(t, m.Remove("fast"), `storage pool "fast" not found`, errors.NotFound)
	checkErr(t, m.Remove("loop"), `storage pool "loop" not found`, errors.NotFound)
}

func TestManagerReplace(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	mustCreate(t, m, "fast", "kubernetes", map[string]any{"storage-class": "ssd"})

	cfg, err := m.Replace("fast", "", map[string]any{"storage-class": "nvme"})
	checkErr(t, err, "", nil)
	if want := (storage.Config{Name: "fast", Provider: "kubernetes", Attrs: map[string]any{"storage-class": "nvme"}}); !reflect.DeepEqual(cfg, want) {
		t.Fatalf("Replace = %+v, want %+v", cfg, want)
	}
	cfg, err = m.Replace("fast", "tmpfs", nil)
	checkErr(t, err, "", nil)
	if got, _ := m.Pool("fast"); got.Provider != "tmpfs" || !reflect.DeepEqual(got, cfg) {
		t.Fatalf("after Replace: %+v", got)
	}
	_, err = m.Replace("fast", "", map[string]any{"persistent": true})
	checkErr(t, err, `machine scoped storage provider "fast" does not support persistent storage`, errors.NotValid)
	_, err = m.Replace("slow", "", nil)
	checkErr(t, err, `pool "slow" not found`, errors.NotFound)
	_, err = m.Replace("slow", "tmpfs", nil)
	checkErr(t, err, `replacing pool "slow": pool "slow" not found`, errors.NotFound)
}

func TestManagerValidate(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	checkErr(t, m.Validate(storage.Config{Name: "p", Provider: "loop"}), "", nil)
	checkErr(t, m.Validate(storage.Config{Name: "p", Provider: "ebs"}), `storage provider "ebs" not found`, errors.NotFound)
	if pools, _ := m.List(); len(pools) != 0 {
		t.Fatalf("Validate stored %v", pools)
	}
	if m.Registry() == nil {
		t.Fatal("no registry")
	}
}

func TestManagerEnsureDefaultPools(t *testing.T) {
	t.Parallel()
	withDefaults := storage.BasicProvider{
		ProviderType:  "static",
		ProviderScope: storage.ScopeEnviron,
		Kinds:         []storage.Kind{storage.KindBlock},
		Pools: []storage.Config{
			{Name: "static-ssd", Provider: "static", Attrs: map[string]any{"type": "ssd"}},
			{Name: "static-hdd", Provider: "static"},
		},
	}
	reg, err := storage.MachineRegistry(withDefaults)
	checkErr(t, err, "", nil)
	m := storage.NewManager(&storage.MemPoolStore{}, reg)
	// An existing pool of a default's name is kept.
	mustCreate(t, m, "static-hdd", "loop", nil)
	checkErr(t, m.EnsureDefaultPools(), "", nil)
	checkErr(t, m.EnsureDefaultPools(), "", nil) // idempotent
	pools, _ := m.List()
	want := []storage.Config{
		{Name: "static-hdd", Provider: "loop"},
		{Name: "static-ssd", Provider: "static", Attrs: map[string]any{"type": "ssd"}},
	}
	if !reflect.DeepEqual(pools, want) {
		t.Fatalf("pools = %+v, want %+v", pools, want)
	}

	bad := storage.BasicProvider{ProviderType: "bad", Pools: []storage.Config{{Name: "1bad", Provider: "bad"}}}
	reg, _ = storage.MachineRegistry(bad)
	m = storage.NewManager(&storage.MemPoolStore{}, reg)
	checkErr(t, m.EnsureDefaultPools(), `creating default pool "1bad": pool name "1bad" not valid`, errors.NotValid)
}

// failingStore fails every call, to show store errors are wrapped, not
// mistaken for NotFound.
type failingStore struct{}

var errDisk = fmt.Errorf("disk on fire")

func (failingStore) GetPool(string) (storage.Config, error) { return storage.Config{}, errDisk }
func (failingStore) PutPool(storage.Config, bool) error     { return errDisk }
func (failingStore) DeletePool(string) error                { return errDisk }
func (failingStore) ListPools() ([]storage.Config, error)   { return nil, errDisk }

func TestManagerStoreErrors(t *testing.T) {
	t.Parallel()
	m := storage.NewManager(failingStore{}, storage.KubernetesRegistry())
	_, err := m.Get("loop")
	checkErr(t, err, `reading pool "loop": disk on fire`, errDisk)
	_, err = m.Create("p", "loop", nil)
	checkErr(t, err, `creating pool "p": disk on fire`, errDisk)
	_, err = m.List()
	checkErr(t, err, "listing pools: disk on fire", errDisk)
	checkErr(t, m.Remove("p"), `deleting pool "p": disk on fire`, errDisk)
	checkErr(t, m.EnsureDefaultPools(), "", nil) // no provider has default pools
	_, _, err = m.CharmStorageParams("", "standard")
	checkErr(t, err, `reading pool "standard": disk on fire`, errDisk)
}

func TestMemPoolStore(t *testing.T) {
	t.Parallel()
	var s storage.MemPoolStore
	_, err := s.GetPool("a")
	checkErr(t, err, `pool "a" not found`, errors.NotFound)
	checkErr(t, s.DeletePool("a"), `pool "a" not found`, errors.NotFound)
	checkErr(t, s.PutPool(storage.Config{Name: "a"}, true), `pool "a" not found`, errors.NotFound)
	checkErr(t, s.PutPool(storage.Config{Name: "a", Provider: "loop"}, false), "", nil)
	checkErr(t, s.PutPool(storage.Config{Name: "a"}, false), `pool "a" already exists`, errors.AlreadyExists)
	checkErr(t, s.PutPool(storage.Config{Name: "a", Provider: "tmpfs"}, true), "", nil)
	got, err := s.GetPool("a")
	checkErr(t, err, "", nil)
	if got.Provider != "tmpfs" {
		t.Fatalf("GetPool = %+v", got)
	}
	checkErr(t, s.DeletePool("a"), "", nil)
	pools, _ := s.ListPools()
	if len(pools) != 0 {
		t.Fatalf("ListPools = %v", pools)
	}
}

func mustCreate(t *testing.T, m *storage.Manager, name string, provider storage.ProviderType, attrs map[string]any) {
	t.Helper()
	if _, err := m.Create(name, provider, attrs); err != nil {
		t.Fatal(err)
	}
}
