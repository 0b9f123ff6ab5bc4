package storage_test

import (
	"reflect"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
)

func TestRegistryLookup(t *testing.T) {
	t.Parallel()
	reg := storage.KubernetesRegistry()
	if got, want := reg.Types(), []storage.ProviderType{"kubernetes", "loop", "rootfs", "tmpfs"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
	var types []storage.ProviderType
	for _, p := range reg.Providers() {
		types = append(types, p.Type())
	}
	if !reflect.DeepEqual(types, reg.Types()) {
		t.Fatalf("Providers() types %v, want sorted %v", types, reg.Types())
	}
	for _, typ := range reg.Types() {
		p, err := reg.Provider(typ)
		checkErr(t, err, "", nil)
		if p.Type() != typ {
			t.Fatalf("Provider(%q).Type() = %q", typ, p.Type())
		}
	}
	_, err := reg.Provider("ebs")
	checkErr(t, err, `storage provider "ebs" not found`, errors.NotFound)
	_, err = reg.Provider("")
	checkErr(t, err, `storage provider "" not found`, errors.NotFound)
}

func TestMachineRegistry(t *testing.T) {
	t.Parallel()
	static := storage.BasicProvider{ProviderType: "static", ProviderScope: storage.ScopeMachine, Kinds: []storage.Kind{storage.KindBlock}}
	reg, err := storage.MachineRegistry(static)
	checkErr(t, err, "", nil)
	if got, want := reg.Types(), []storage.ProviderType{"loop", "rootfs", "static", "tmpfs"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Types() = %v, want %v", got, want)
	}
	if _, err := reg.Provider("kubernetes"); !errors.Is(err, errors.NotFound) {
		t.Fatalf("machine registry has kubernetes: %v", err)
	}
	p, _ := reg.Provider("static")
	if p.Dynamic() {
		t.Fatalf("static provider is dynamic")
	}
}

func TestNewRegistryErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		providers []storage.Provider
		err       string
		kind      error
	}{
		{name: "duplicate", providers: []storage.Provider{storage.LoopProvider{}, storage.LoopProvider{}}, err: `storage provider "loop" already exists`, kind: errors.AlreadyExists},
		{name: "duplicate of common", providers: append(storage.CommonProviders(), storage.BasicProvider{ProviderType: "tmpfs"}), err: `storage provider "tmpfs" already exists`, kind: errors.AlreadyExists},
		{name: "empty type", providers: []storage.Provider{storage.BasicProvider{}}, err: "empty storage provider type not valid", kind: errors.NotValid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := storage.NewRegistry(tc.providers...)
			checkErr(t, err, tc.err, tc.kind)
		})
	}
}

// The properties are Juju's providers' (caas/kubernetes/provider/storage.go,
// storage/provider/{rootfs,tmpfs,loop}.go): detachable is state's
// isDetachableVolumePool / isDetachableFilesystemPool (environ-scoped and
// dynamic), releasable the providers' Releasable.
func TestProviderProperties(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p                      storage.Provider
		typ                    storage.ProviderType
		scope                  storage.Scope
		dynamic                bool
		block, fs              bool
		detachable, releasable bool
	}{
		{storage.KubernetesProvider{}, "kubernetes", storage.ScopeEnviron, true, true, true, true, true},
		{storage.RootfsProvider{}, "rootfs", storage.ScopeMachine, true, false, true, false, false},
		{storage.TmpfsProvider{}, "tmpfs", storage.ScopeMachine, true, false, true, false, false},
		{storage.LoopProvider{}, "loop", storage.ScopeMachine, true, true, false, false, false},
		{storage.BasicProvider{ProviderType: "static", ProviderScope: storage.ScopeEnviron, Kinds: []storage.Kind{storage.KindFilesystem}}, "static", storage.ScopeEnviron, false, false, true, false, false},
	}
	for _, tc := range tests {
		t.Run(string(tc.typ), func(t *testing.T) {
			t.Parallel()
			p := tc.p
			if p.Type() != tc.typ || p.Scope() != tc.scope || p.Dynamic() != tc.dynamic ||
				p.Supports(storage.KindBlock) != tc.block || p.Supports(storage.KindFilesystem) != tc.fs {
				t.Fatalf("%s: type %q scope %q dynamic %v block %v fs %v", tc.typ, p.Type(), p.Scope(), p.Dynamic(),
					p.Supports(storage.KindBlock), p.Supports(storage.KindFilesystem))
			}
			if p.Supports("object") {
				t.Fatalf("%s supports an unknown kind", tc.typ)
			}
			if storage.Detachable(p) != tc.detachable || p.Releasable() != tc.releasable {
				t.Fatalf("%s: detachable %v releasable %v", tc.typ, storage.Detachable(p), p.Releasable())
			}
			if len(p.DefaultPools()) != 0 {
				t.Fatalf("%s has default pools %v", tc.typ, p.DefaultPools())
			}
		})
	}
}

func TestKubernetesValidateConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		attrs map[string]any
		err   string
		kind  error
	}{
		{name: "no attributes", attrs: nil},
		{name: "class", attrs: map[string]any{"storage-class": "fast"}},
		{name: "class and provisioner", attrs: map[string]any{"storage-class": "fast", "storage-provisioner": "kubernetes.io/gce-pd", "parameters.type": "pd-ssd"}},
		{name: "unknown attributes are allowed", attrs: map[string]any{"foo": "bar"}},
		{name: "mode RWO", attrs: map[string]any{"storage-mode": "RWO"}},
		{name: "mode ReadWriteMany", attrs: map[string]any{"storage-mode": "ReadWriteMany"}},
		{name: "mode ROX", attrs: map[string]any{"storage-mode": "ROX"}},
		{name: "provisioner without class", attrs: map[string]any{"storage-provisioner": "kubernetes.io/gce-pd"},
			err: "storage-class must be specified if storage-provisioner is specified", kind: errors.NotValid},
		{name: "provisioner with empty class", attrs: map[string]any{"storage-class": "", "storage-provisioner": "p"},
			err: "storage-class must be specified if storage-provisioner is specified", kind: errors.NotValid},
		{name: "class not a string", attrs: map[string]any{"storage-class": 1},
			err: "validating storage config: storage-class: expected string, got int(1)", kind: errors.NotValid},
		{name: "provisioner not a string", attrs: map[string]any{"storage-class": "c", "storage-provisioner": true},
			err: "validating storage config: storage-provisioner: expected string, got bool(true)", kind: errors.NotValid},
		{name: "unknown mode", attrs: map[string]any{"storage-mode": "RWOP"},
			err: `storage mode "RWOP" not supported`, kind: errors.NotSupported},
		{name: "mode not a string", attrs: map[string]any{"storage-mode": 2.5},
			err: "validating storage mode: storage-mode: expected string, got float64(2.5)", kind: errors.NotValid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, storage.KubernetesProvider{}.ValidateConfig(tc.attrs), tc.err, tc.kind)
		})
	}
}

func TestMachineProvidersTakeAnyAttributes(t *testing.T) {
	t.Parallel()
	attrs := map[string]any{"size": "100M", "storage-class": 1}
	for _, p := range storage.CommonProviders() {
		checkErr(t, p.ValidateConfig(attrs), "", nil)
	}
}

func TestProviderParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		p     storage.Provider
		attrs map[string]any
		want  storage.Params
		err   string
	}{
		{name: "kubernetes defaults", p: storage.KubernetesProvider{},
			want: storage.Params{Provider: "kubernetes", Persistent: true, Parameters: map[string]string{}, ReclaimPolicy: "Retain", AccessMode: "ReadWriteOnce"}},
		{name: "kubernetes full", p: storage.KubernetesProvider{},
			attrs: map[string]any{"storage-class": "fast", "storage-provisioner": "kubernetes.io/gce-pd",
				"parameters.type": "pd-ssd", "parameters.replicas": 3, "storage-mode": "RWX", "other": "ignored"},
			want: storage.Params{Provider: "kubernetes", Persistent: true, StorageClass: "fast", StorageProvisioner: "kubernetes.io/gce-pd",
				Parameters: map[string]string{"type": "pd-ssd", "replicas": "3"}, ReclaimPolicy: "Retain", AccessMode: "ReadWriteMany"}},
		{name: "kubernetes invalid", p: storage.KubernetesProvider{}, attrs: map[string]any{"storage-mode": "bad"},
			err: `storage mode "bad" not supported`},
		{name: "kubernetes invalid class", p: storage.KubernetesProvider{}, attrs: map[string]any{"storage-provisioner": "p"},
			err: "storage-class must be specified if storage-provisioner is specified"},
		{name: "rootfs", p: storage.RootfsProvider{}, attrs: map[string]any{"storage-medium": "Memory"},
			want: storage.Params{Provider: "rootfs", EmptyDir: true}},
		{name: "tmpfs default medium", p: storage.TmpfsProvider{},
			want: storage.Params{Provider: "tmpfs", EmptyDir: true, Medium: "Memory"}},
		{name: "tmpfs huge pages", p: storage.TmpfsProvider{}, attrs: map[string]any{"storage-medium": "HugePages"},
			want: storage.Params{Provider: "tmpfs", EmptyDir: true, Medium: "HugePages"}},
		{name: "loop", p: storage.LoopProvider{}, want: storage.Params{Provider: "loop"}},
		{name: "basic persistent", p: storage.BasicProvider{ProviderType: "static"}, attrs: map[string]any{"persistent": "true"},
			want: storage.Params{Provider: "static", Persistent: true}},
		{name: "basic bad persistent", p: storage.BasicProvider{ProviderType: "static"}, attrs: map[string]any{"persistent": 1},
			err: "validating common storage config: persistent: expected bool, got int(1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.p.Params(tc.attrs)
			checkErr(t, err, tc.err, nil)
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Params = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestValidateForKubernetes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		p     storage.Provider
		attrs map[string]any
		err   string
		kind  error
	}{
		{name: "kubernetes", p: storage.KubernetesProvider{}, attrs: map[string]any{"storage-class": "x"}},
		{name: "rootfs", p: storage.RootfsProvider{}},
		{name: "tmpfs memory", p: storage.TmpfsProvider{}, attrs: map[string]any{"storage-medium": "Memory"}},
		{name: "tmpfs huge pages", p: storage.TmpfsProvider{}, attrs: map[string]any{"storage-medium": "HugePages"}},
		{name: "loop", p: storage.LoopProvider{}, err: `storage provider type "loop" not valid`, kind: errors.NotValid},
		{name: "bad medium", p: storage.TmpfsProvider{}, attrs: map[string]any{"storage-medium": "Disk"},
			err: `storage medium "Disk" not valid`, kind: errors.NotValid},
		{name: "rootfs gets kubernetes attribute checks", p: storage.RootfsProvider{}, attrs: map[string]any{"storage-provisioner": "p"},
			err: "storage-class must be specified if storage-provisioner is specified", kind: errors.NotValid},
		{name: "bad mode", p: storage.KubernetesProvider{}, attrs: map[string]any{"storage-mode": "x"},
			err: `storage mode "x" not supported`, kind: errors.NotSupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkErr(t, storage.ValidateForKubernetes(tc.p, tc.attrs), tc.err, tc.kind)
		})
	}
}
