package storage_test

import (
	"reflect"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
)

func TestBuiltinEnvironProviders(t *testing.T) {
	t.Parallel()
	reg, err := storage.MachineRegistry(storage.BuiltinEnvironProviders()...)
	checkErr(t, err, "", nil)
	for _, typ := range []storage.ProviderType{"builtin", "ebs", "cinder"} {
		p, err := reg.Provider(typ)
		checkErr(t, err, "", nil)
		if p.Dynamic() || p.Scope() != storage.ScopeEnviron || !p.Supports(storage.KindBlock) || p.Supports(storage.KindFilesystem) {
			t.Errorf("%s: dynamic %v scope %v", typ, p.Dynamic(), p.Scope())
		}
		if storage.IsCommonProvider(typ) {
			t.Errorf("%s is common", typ)
		}
	}
	for _, typ := range []storage.ProviderType{"loop", "rootfs", "tmpfs"} {
		if !storage.IsCommonProvider(typ) {
			t.Errorf("%s is not common", typ)
		}
	}
	if storage.IsCommonProvider("kubernetes") {
		t.Error("kubernetes is common")
	}
}

func TestVolumeParams(t *testing.T) {
	t.Parallel()
	reg, err := storage.MachineRegistry(storage.BuiltinEnvironProviders()...)
	checkErr(t, err, "", nil)
	store := &storage.MemPoolStore{}
	m := storage.NewManager(store, reg)
	mustCreate(t, m, "fast", "ebs", map[string]any{"persistent": "true", "iops": 300})
	mustCreate(t, m, "plain", "loop", nil)
	// Pools stored past the manager are validated when used.
	checkErr(t, store.PutPool(storage.Config{Name: "bad", Provider: "ebs", Attrs: map[string]any{"persistent": 1}}, false), "", nil)
	checkErr(t, store.PutPool(storage.Config{Name: "gone", Provider: "nfs"}, false), "", nil)
	tags := map[string]string{"juju-model-uuid": "u"}

	tests := []struct {
		name string
		args storage.VolumeArgs
		want storage.VolumeParams
		err  string
		kind error
	}{
		{name: "pool", args: storage.VolumeArgs{Pool: "fast", Size: 10, ReadOnly: true, Tags: tags},
			want: storage.VolumeParams{Pool: "fast", Size: 10, Provider: "ebs", Attributes: map[string]any{"persistent": "true", "iops": 300},
				Tags: tags, EnvironManaged: true, Attachment: storage.VolumeAttachmentParams{Provider: "ebs", ReadOnly: true}}},
		{name: "provider type", args: storage.VolumeArgs{Pool: "cinder", Size: 5},
			want: storage.VolumeParams{Pool: "cinder", Size: 5, Provider: "cinder", EnvironManaged: true,
				Attachment: storage.VolumeAttachmentParams{Provider: "cinder"}}},
		{name: "common pool", args: storage.VolumeArgs{Pool: "plain", Size: 5},
			want: storage.VolumeParams{Pool: "plain", Size: 5, Provider: "loop", Dynamic: true,
				Attachment: storage.VolumeAttachmentParams{Provider: "loop"}}},
		{name: "default is loop", args: storage.VolumeArgs{Size: 5},
			want: storage.VolumeParams{Pool: "loop", Size: 5, Provider: "loop", Dynamic: true,
				Attachment: storage.VolumeAttachmentParams{Provider: "loop"}}},
		{name: "default block source", args: storage.VolumeArgs{Size: 5, DefaultBlockSource: "fast"},
			want: storage.VolumeParams{Pool: "fast", Size: 5, Provider: "ebs", Attributes: map[string]any{"persistent": "true", "iops": 300},
				EnvironManaged: true, Attachment: storage.VolumeAttachmentParams{Provider: "ebs"}}},
		{name: "unknown", args: storage.VolumeArgs{Pool: "nope"}, err: `pool "nope" not found`, kind: errors.NotFound},
		{name: "unknown default", args: storage.VolumeArgs{DefaultBlockSource: "nope"}, err: `pool "nope" not found`, kind: errors.NotFound},
		{name: "invalid attributes", args: storage.VolumeArgs{Pool: "bad"},
			err: `pool "bad": validating common storage config: persistent: expected bool, got int(1)`, kind: errors.NotValid},
		{name: "provider gone", args: storage.VolumeArgs{Pool: "gone"}, err: `pool "gone": storage provider "nfs" not found`, kind: errors.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.VolumeParams(tt.args)
			checkErr(t, err, tt.err, tt.kind)
			if tt.err == "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("VolumeParams =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}

	// The result is the caller's.
	got, err := m.VolumeParams(storage.VolumeArgs{Pool: "fast", Tags: tags})
	checkErr(t, err, "", nil)
	got.Attributes["iops"], got.Tags["x"] = 1, "y"
	if again, _ := m.VolumeParams(storage.VolumeArgs{Pool: "fast"}); again.Attributes["iops"] != 300 || len(tags) != 1 {
		t.Errorf("attributes or tags shared: %v %v", again.Attributes, tags)
	}
}
