package storage_test

import (
	"errors"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
)

func TestDefaultPool(t *testing.T) {
	t.Parallel()
	type C = storage.Constraints
	type D = storage.PoolDefaults
	some := C{Size: 10}
	tests := []struct {
		name string
		kind storage.Kind
		cons C
		d    D
		want string
		err  error
	}{
		{name: "block, no constraints", kind: storage.KindBlock, d: D{Block: "ebs"}, want: "loop"},
		{name: "block, constraints, default source", kind: storage.KindBlock, cons: some, d: D{Block: "ebs"}, want: "ebs"},
		{name: "block, constraints, no default", kind: storage.KindBlock, cons: C{Count: 2}, want: "loop"},
		{name: "block, filesystem source ignored", kind: storage.KindBlock, cons: some, d: D{Filesystem: "nfs"}, want: "loop"},
		{name: "filesystem, no constraints", kind: storage.KindFilesystem, d: D{Filesystem: "nfs", Block: "ebs"}, want: "rootfs"},
		{name: "filesystem, filesystem source", kind: storage.KindFilesystem, cons: some, d: D{Filesystem: "nfs", Block: "ebs"}, want: "nfs"},
		{name: "filesystem, block source", kind: storage.KindFilesystem, cons: some, d: D{Block: "ebs"}, want: "ebs"},
		{name: "filesystem, no default", kind: storage.KindFilesystem, cons: some, want: "rootfs"},
		{name: "kubernetes filesystem, no constraints", kind: storage.KindFilesystem, d: D{Kubernetes: true, Filesystem: "x"}, want: "kubernetes"},
		{name: "kubernetes filesystem, no default", kind: storage.KindFilesystem, cons: some, d: D{Kubernetes: true}, want: "kubernetes"},
		{name: "kubernetes filesystem, default source", kind: storage.KindFilesystem, cons: some, d: D{Kubernetes: true, Filesystem: "fast"}, want: "fast"},
		{name: "kubernetes block", kind: storage.KindBlock, d: D{Kubernetes: true}, want: "kubernetes"},
		{name: "unknown kind", kind: "object", err: storage.ErrNoDefaultPool},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storage.DefaultPool(tc.kind, tc.cons, tc.d)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("DefaultPool = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestConstraintsWithDefaults(t *testing.T) {
	t.Parallel()
	type C = storage.Constraints
	fs := storage.CharmStorage{Name: "data", Kind: storage.KindFilesystem, CountMin: 1, CountMax: 1}
	tests := []struct {
		name string
		cs   storage.CharmStorage
		cons C
		d    storage.PoolDefaults
		want C
		err  string
	}{
		{name: "nothing given", cs: fs, want: C{Pool: "rootfs", Size: 1024, Count: 1}},
		{name: "charm minimum size", cs: storage.CharmStorage{Name: "d", Kind: storage.KindBlock, MinimumSize: 2048, CountMin: 2},
			want: C{Pool: "loop", Size: 2048, Count: 2}},
		{name: "count min zero", cs: storage.CharmStorage{Name: "d", Kind: storage.KindFilesystem}, want: C{Pool: "rootfs", Size: 1024}},
		{name: "given values kept", cs: fs, cons: C{Pool: "tmpfs", Size: 5, Count: 3}, want: C{Pool: "tmpfs", Size: 5, Count: 3}},
		{name: "size given, default source", cs: fs, cons: C{Size: 100, Count: 1}, d: storage.PoolDefaults{Block: "ebs"},
			want: C{Pool: "ebs", Size: 100, Count: 1}},
		{name: "kubernetes", cs: fs, d: storage.PoolDefaults{Kubernetes: true}, want: C{Pool: "kubernetes", Size: 1024, Count: 1}},
		{name: "unknown kind", cs: storage.CharmStorage{Name: "weird", Kind: "object"},
			err: `finding default pool for "weird" storage: no storage pool specified and no default available`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storage.ConstraintsWithDefaults(tc.cs, tc.cons, tc.d)
			checkErr(t, err, tc.err, nil)
			if tc.err != "" {
				if !errors.Is(err, storage.ErrNoDefaultPool) {
					t.Fatalf("error %v is not ErrNoDefaultPool", err)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("ConstraintsWithDefaults = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFilesystemMountPoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cs   storage.CharmStorage
		id   string
		want string
		err  string
	}{
		{name: "no location", cs: storage.CharmStorage{CountMax: 1}, id: "data/0", want: "/var/lib/juju/storage/data/0"},
		{name: "no location, many", cs: storage.CharmStorage{CountMax: -1}, id: "data/3", want: "/var/lib/juju/storage/data/3"},
		{name: "location, singleton", cs: storage.CharmStorage{Location: "/var/lib/mysql", CountMax: 1}, id: "db/0", want: "/var/lib/mysql"},
		{name: "location, many", cs: storage.CharmStorage{Location: "/srv/data", CountMax: 3}, id: "data/2", want: "/srv/data/data/2"},
		{name: "location, unbounded", cs: storage.CharmStorage{Location: "/srv/data", CountMax: -1}, id: "data/0", want: "/srv/data/data/0"},
		{name: "location, count max unset", cs: storage.CharmStorage{Location: "/srv"}, id: "d/0", want: "/srv/d/0"},
		{name: "location cleaned", cs: storage.CharmStorage{Location: "/srv/data/", CountMax: 2}, id: "d/1", want: "/srv/data/d/1"},
		{name: "inside the storage dir", cs: storage.CharmStorage{Location: "/var/lib/juju/storage/x", CountMax: 1}, id: "d/0",
			err: `invalid location "/var/lib/juju/storage/x": must not fall within "/var/lib/juju/storage"`},
		{name: "the storage dir itself", cs: storage.CharmStorage{Location: "/var/lib/juju/storage"}, id: "d/0",
			err: `invalid location "/var/lib/juju/storage": must not fall within "/var/lib/juju/storage"`},
		{name: "string prefix, as Juju", cs: storage.CharmStorage{Location: "/var/lib/juju/storagex"}, id: "d/0",
			err: `invalid location "/var/lib/juju/storagex": must not fall within "/var/lib/juju/storage"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storage.FilesystemMountPoint(tc.cs, tc.id)
			var kind error
			if tc.err != "" {
				kind = jujuerrors.NotValid
			}
			checkErr(t, err, tc.err, kind)
			if got != tc.want {
				t.Fatalf("FilesystemMountPoint = %q, want %q", got, tc.want)
			}
		})
	}
}
