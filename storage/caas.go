package storage

import (
	"fmt"
	"maps"
	"slices"

	"github.com/juju/errors"
)

// TagStorageOwner is the resource tag naming the application that owns a
// filesystem.
const TagStorageOwner = "juju-storage-owner"

// FilesystemParams are the parameters of one filesystem of a Kubernetes
// application, as CAASUnitProvisioner.ProvisioningInfo returns them.
type FilesystemParams struct {
	StorageName string
	Size        uint64 // MiB
	Provider    ProviderType
	Attributes  map[string]any
	Tags        map[string]string
	Attachment  *FilesystemAttachmentParams
}

// FilesystemAttachmentParams say where and how a filesystem is mounted.
type FilesystemAttachmentParams struct {
	Provider   ProviderType
	MountPoint string
	ReadOnly   bool
}

// CharmStorageParams resolves the provider and attributes of Kubernetes
// charm storage (Juju's CharmStorageParams): pool is the storage
// constraints' pool, storageClass the model's workload-storage.
//
//   - The default is provider kubernetes with no attributes; a pool named
//     "kubernetes" counts as no pool.
//   - The name looked up is the pool, else storageClass.
//   - A stored pool gives its provider, and its attributes when it has
//     any. A provider type gives that provider with no attributes, if it
//     supports filesystems (otherwise NotValid `storage provider "x" not
//     valid`). Anything else is the pool's NotFound, which is returned only
//     when the pool was given: when only the storage class was looked up,
//     the default is kept.
//   - A kubernetes provider without storage-class gets storageClass.
//
// The attributes returned are the caller's to change.
func (m *Manager) CharmStorageParams(pool, storageClass string) (ProviderType, map[string]any, error) {
	provider, attrs := ProviderKubernetes, map[string]any{}
	if pool == string(ProviderKubernetes) {
		pool = ""
	}
	name := pool
	if name == "" {
		name = storageClass
	}
	cfg, p, byType, err := m.resolve(name)
	if err == nil && byType && !p.Supports(KindFilesystem) {
		err = errors.NotValidf("storage provider %q", p.Type())
	}
	if err != nil && (!errors.Is(err, errors.NotFound) || pool != "") {
		return "", nil, err
	}
	if err == nil {
		provider = cfg.Provider
		if len(cfg.Attrs) > 0 {
			attrs = maps.Clone(cfg.Attrs)
		}
	}
	if _, ok := attrs[AttrStorageClass]; !ok && provider == ProviderKubernetes {
		attrs[AttrStorageClass] = storageClass
	}
	return provider, attrs, nil
}

// FilesystemArgs are the inputs of ApplicationFilesystems.
type FilesystemArgs struct {
	// Application is the application's name (the storage owner tag).
	Application string
	// Constraints are the application's storage constraints by name.
	Constraints map[string]Constraints
	// Charm is the charm metadata's storage by name. A name missing here
	// has no location and is not read-only.
	Charm map[string]CharmStorage
	// StorageClass is the model config's workload-storage ("" if unset).
	StorageClass string
	// ResourceTags are the model's resource tags (resource-tags plus
	// juju-model-uuid and juju-controller-uuid); they are copied.
	ResourceTags map[string]string
}

// ApplicationFilesystems builds the filesystems of a Kubernetes
// application for CAASUnitProvisioner.ProvisioningInfo
// (specs/caasunitprovisioner.md §5 step 7). For each storage name, in
// sorted order, it resolves the parameters once (even for a count of 0),
// then emits one filesystem per instance with its attachment and mount
// point (FilesystemMountPoint of "<name>/<i>"). Errors read
// `getting filesystem "<name>" parameters: ...`; in particular with no
// pool and no storage class:
// `... storage pool for "<name>" must be specified since there's no model default storage class`.
func (m *Manager) ApplicationFilesystems(args FilesystemArgs) ([]FilesystemParams, error) {
	var out []FilesystemParams
	for _, name := range slices.Sorted(maps.Keys(args.Constraints)) {
		cons := args.Constraints[name]
		base, err := m.filesystemParams(args, name, cons)
		if err != nil {
			return nil, fmt.Errorf("getting filesystem %q parameters: %w", name, err)
		}
		cs := args.Charm[name]
		for i := range cons.Count {
			mp, err := FilesystemMountPoint(cs, fmt.Sprintf("%s/%d", name, i))
			if err != nil {
				return nil, err
			}
			fs := base
			fs.Attributes = maps.Clone(base.Attributes)
			fs.Tags = maps.Clone(base.Tags)
			fs.Attachment = &FilesystemAttachmentParams{
				Provider:   base.Provider,
				MountPoint: mp,
				ReadOnly:   cs.ReadOnly,
			}
			out = append(out, fs)
		}
	}
	return out, nil
}

func (m *Manager) filesystemParams(args FilesystemArgs, name string, cons Constraints) (FilesystemParams, error) {
	if cons.Pool == "" && args.StorageClass == "" {
		return FilesystemParams{}, fmt.Errorf(
			"storage pool for %q must be specified since there's no model default storage class", name)
	}
	provider, attrs, err := m.CharmStorageParams(cons.Pool, args.StorageClass)
	if err != nil {
		return FilesystemParams{}, fmt.Errorf("getting filesystem storage parameters: %w", err)
	}
	tags := maps.Clone(args.ResourceTags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[TagStorageOwner] = args.Application
	return FilesystemParams{
		StorageName: name,
		Size:        cons.Size,
		Provider:    provider,
		Attributes:  attrs,
		Tags:        tags,
	}, nil
}
