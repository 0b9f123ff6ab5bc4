package storage_test

import (
	"reflect"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
)

func caasManager(t *testing.T) *storage.Manager {
	t.Helper()
	reg, err := storage.NewRegistry(append(storage.CommonProviders(), storage.KubernetesProvider{},
		storage.BasicProvider{ProviderType: "blockonly", ProviderScope: storage.ScopeEnviron, IsDynamic: true, Kinds: []storage.Kind{storage.KindBlock}})...)
	checkErr(t, err, "", nil)
	m := storage.NewManager(&storage.MemPoolStore{}, reg)
	mustCreate(t, m, "fast", "kubernetes", map[string]any{"storage-class": "ssd", "parameters.type": "pd-ssd"})
	mustCreate(t, m, "bare", "kubernetes", nil)
	mustCreate(t, m, "standard", "kubernetes", map[string]any{"storage-provisioner": "p", "storage-class": "std"})
	mustCreate(t, m, "ram", "tmpfs", map[string]any{"storage-medium": "Memory"})
	mustCreate(t, m, "disk", "rootfs", nil)
	return m
}

func TestCharmStorageParams(t *testing.T) {
	t.Parallel()
	m := caasManager(t)
	tests := []struct {
		name, pool, class string
		provider          storage.ProviderType
		attrs             map[string]any
		err               string
		kind              error
	}{
		{name: "pool with class", pool: "fast", class: "model-class", provider: "kubernetes",
			attrs: map[string]any{"storage-class": "ssd", "parameters.type": "pd-ssd"}},
		{name: "pool without attributes gets the model class", pool: "bare", class: "model-class", provider: "kubernetes",
			attrs: map[string]any{"storage-class": "model-class"}},
		{name: "tmpfs pool", pool: "ram", class: "model-class", provider: "tmpfs", attrs: map[string]any{"storage-medium": "Memory"}},
		{name: "rootfs pool without attributes", pool: "disk", class: "model-class", provider: "rootfs", attrs: map[string]any{}},
		{name: "provider type as pool", pool: "tmpfs", class: "model-class", provider: "tmpfs", attrs: map[string]any{}},
		{name: "kubernetes pool name is no pool", pool: "kubernetes", class: "fast", provider: "kubernetes",
			attrs: map[string]any{"storage-class": "ssd", "parameters.type": "pd-ssd"}},
		{name: "kubernetes and no class", pool: "kubernetes", class: "", provider: "kubernetes", attrs: map[string]any{"storage-class": ""}},
		{name: "class names a pool", pool: "", class: "standard", provider: "kubernetes",
			attrs: map[string]any{"storage-provisioner": "p", "storage-class": "std"}},
		{name: "class names a provider", pool: "", class: "rootfs", provider: "rootfs", attrs: map[string]any{}},
		{name: "class is a plain storage class", pool: "", class: "microk8s-hostpath", provider: "kubernetes",
			attrs: map[string]any{"storage-class": "microk8s-hostpath"}},
		{name: "unknown pool", pool: "nope", class: "x", err: `pool "nope" not found`, kind: errors.NotFound},
		{name: "block-only provider as pool", pool: "loop", class: "x", err: `storage provider "loop" not valid`, kind: errors.NotValid},
		{name: "block-only provider as class", pool: "", class: "blockonly", err: `storage provider "blockonly" not valid`, kind: errors.NotValid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			provider, attrs, err := m.CharmStorageParams(tc.pool, tc.class)
			checkErr(t, err, tc.err, tc.kind)
			if err != nil {
				return
			}
			if provider != tc.provider || !reflect.DeepEqual(attrs, tc.attrs) {
				t.Fatalf("CharmStorageParams(%q, %q) = %q %v, want %q %v", tc.pool, tc.class, provider, attrs, tc.provider, tc.attrs)
			}
		})
	}
	// The attributes returned are a copy.
	_, attrs, _ := m.CharmStorageParams("fast", "")
	attrs["storage-class"] = "changed"
	if got, _ := m.Pool("fast"); got.Attrs["storage-class"] != "ssd" {
		t.Fatalf("pool changed through CharmStorageParams: %v", got.Attrs)
	}
}

func TestApplicationFilesystems(t *testing.T) {
	t.Parallel()
	m := caasManager(t)
	tags := map[string]string{"juju-model-uuid": "m-uuid", "juju-controller-uuid": "c-uuid"}
	got, err := m.ApplicationFilesystems(storage.FilesystemArgs{
		Application: "gitlab",
		Constraints: map[string]storage.Constraints{
			"logs":  {Pool: "ram", Size: 50, Count: 1},
			"data":  {Pool: "fast", Size: 100, Count: 2},
			"cache": {Size: 10, Count: 1},
			"empty": {Pool: "fast", Size: 1, Count: 0},
		},
		Charm: map[string]storage.CharmStorage{
			"data": {Name: "data", Kind: storage.KindFilesystem, Location: "/srv", CountMax: -1},
			"logs": {Name: "logs", Kind: storage.KindFilesystem, Location: "/var/log/gitlab", CountMax: 1, ReadOnly: true},
		},
		StorageClass: "standard",
		ResourceTags: tags,
	})
	checkErr(t, err, "", nil)
	owner := map[string]string{"juju-model-uuid": "m-uuid", "juju-controller-uuid": "c-uuid", "juju-storage-owner": "gitlab"}
	fast := map[string]any{"storage-class": "ssd", "parameters.type": "pd-ssd"}
	want := []storage.FilesystemParams{
		{StorageName: "cache", Size: 10, Provider: "kubernetes", Attributes: map[string]any{"storage-provisioner": "p", "storage-class": "std"}, Tags: owner,
			Attachment: &storage.FilesystemAttachmentParams{Provider: "kubernetes", MountPoint: "/var/lib/juju/storage/cache/0"}},
		{StorageName: "data", Size: 100, Provider: "kubernetes", Attributes: fast, Tags: owner,
			Attachment: &storage.FilesystemAttachmentParams{Provider: "kubernetes", MountPoint: "/srv/data/0"}},
		{StorageName: "data", Size: 100, Provider: "kubernetes", Attributes: fast, Tags: owner,
			Attachment: &storage.FilesystemAttachmentParams{Provider: "kubernetes", MountPoint: "/srv/data/1"}},
		{StorageName: "logs", Size: 50, Provider: "tmpfs", Attributes: map[string]any{"storage-medium": "Memory"}, Tags: owner,
			Attachment: &storage.FilesystemAttachmentParams{Provider: "tmpfs", MountPoint: "/var/log/gitlab", ReadOnly: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ApplicationFilesystems =\n%+v\nwant\n%+v", got, want)
	}
	// Each filesystem owns its maps; the caller's tags are untouched.
	got[1].Attributes["storage-class"] = "x"
	got[1].Tags["x"] = "y"
	if got[2].Attributes["storage-class"] != "ssd" || got[2].Tags["x"] != "" {
		t.Fatal("filesystems share maps")
	}
	if _, ok := tags["juju-storage-owner"]; ok {
		t.Fatal("caller's resource tags changed")
	}
}

func TestApplicationFilesystemsErrors(t *testing.T) {
	t.Parallel()
	m := caasManager(t)
	tests := []struct {
		name  string
		args  storage.FilesystemArgs
		err   string
		kind  error
		empty bool
	}{
		{name: "no constraints", args: storage.FilesystemArgs{Application: "a"}, empty: true},
		{name: "no pool and no model default storage class",
			args: storage.FilesystemArgs{Application: "a", Constraints: map[string]storage.Constraints{"data": {Size: 1, Count: 1}}},
			err:  `getting filesystem "data" parameters: storage pool for "data" must be specified since there's no model default storage class`},
		{name: "count zero still resolves",
			args: storage.FilesystemArgs{Application: "a", Constraints: map[string]storage.Constraints{"data": {Pool: "nope"}}},
			err:  `getting filesystem "data" parameters: getting filesystem storage parameters: pool "nope" not found`, kind: errors.NotFound},
		{name: "provider not for filesystems",
			args: storage.FilesystemArgs{Application: "a", StorageClass: "c", Constraints: map[string]storage.Constraints{"data": {Pool: "loop", Count: 1}}},
			err:  `getting filesystem "data" parameters: getting filesystem storage parameters: storage provider "loop" not valid`, kind: errors.NotValid},
		{name: "first name in sorted order fails first",
			args: storage.FilesystemArgs{Application: "a", Constraints: map[string]storage.Constraints{"b": {Count: 1}, "a": {Count: 1}}},
			err:  `getting filesystem "a" parameters: storage pool for "a" must be specified since there's no model default storage class`},
		{name: "bad charm location",
			args: storage.FilesystemArgs{Application: "a", StorageClass: "c",
				Constraints: map[string]storage.Constraints{"data": {Count: 1}},
				Charm:       map[string]storage.CharmStorage{"data": {Location: "/var/lib/juju/storage/data"}}},
			err: `invalid location "/var/lib/juju/storage/data": must not fall within "/var/lib/juju/storage"`, kind: errors.NotValid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := m.ApplicationFilesystems(tc.args)
			checkErr(t, err, tc.err, tc.kind)
			if (len(got) == 0) != (tc.empty || tc.err != "") {
				t.Fatalf("got %d filesystems", len(got))
			}
		})
	}
}
