package storage

import (
	"fmt"
	"maps"
	"slices"
)

// The storage providers of provisiond's built-in environ (Juju's
// env.StorageProvider): static block providers whose volumes the machine
// provisioner makes with the instance.
const (
	ProviderBuiltin ProviderType = "builtin"
	ProviderEBS     ProviderType = "ebs"
	ProviderCinder  ProviderType = "cinder"
)

// BuiltinEnvironProviders are the storage providers of provisiond's
// built-in environ: builtin, ebs and cinder, environ-scoped, static
// (Dynamic false) and block only. MachineRegistry(BuiltinEnvironProviders()...)
// is the registry of an IAAS model.
func BuiltinEnvironProviders() []Provider {
	out := make([]Provider, 0, 3)
	for _, t := range []ProviderType{ProviderBuiltin, ProviderEBS, ProviderCinder} {
		out = append(out, BasicProvider{ProviderType: t, ProviderScope: ScopeEnviron, Kinds: []Kind{KindBlock}})
	}
	return out
}

// IsCommonProvider reports whether t is one of the common providers
// (loop, rootfs, tmpfs). Their storage is made by the storage provisioner
// on the machine; any other provider of a machine registry is the
// environ's (Juju's env.StorageProvider finds it).
func IsCommonProvider(t ProviderType) bool {
	return slices.ContainsFunc(CommonProviders(), func(p Provider) bool { return p.Type() == t })
}

// VolumeArgs are the inputs of Manager.VolumeParams: one volume of a
// machine.
type VolumeArgs struct {
	// Pool is the volume's pool or provider type; "" is the model's
	// default block source.
	Pool string
	// Size is the volume's size in MiB.
	Size uint64
	// ReadOnly is the attachment's.
	ReadOnly bool
	// DefaultBlockSource is the model config's storage-default-block-source
	// ("" when unset).
	DefaultBlockSource string
	// Tags are the volume's resource tags; they are copied.
	Tags map[string]string
}

// VolumeParams are the parameters of one machine volume, as
// Provisioner.ProvisioningInfo returns them.
type VolumeParams struct {
	// Pool is the pool the volume was resolved from (the default block
	// source when the volume named none).
	Pool       string
	Size       uint64 // MiB
	Provider   ProviderType
	Attributes map[string]any // the pool's; nil for a provider type
	Tags       map[string]string
	// Dynamic is the provider's: dynamic volumes are made by the storage
	// provisioner after the machine starts, static ones with the instance.
	Dynamic bool
	// EnvironManaged is set when the provider is the environ's rather than
	// a common one (see IsCommonProvider).
	EnvironManaged bool
	Attachment     VolumeAttachmentParams
}

// VolumeAttachmentParams say how a volume is attached to its machine.
type VolumeAttachmentParams struct {
	Provider ProviderType
	ReadOnly bool
}

// VolumeParams resolves the provider and attributes of a machine volume
// as Juju does (state's volumeParamsWithDefaults, then
// storagecommon.VolumeParams):
//
//   - no pool is DefaultPool(KindBlock, {Size, Count: 1}, {Block:
//     DefaultBlockSource}): the model's storage-default-block-source,
//     else loop;
//   - a pool of the model gives its provider and a copy of its
//     attributes, validated again as Validate does (the common attributes,
//     then the provider's ValidateConfig);
//   - a name that is no pool but a provider type of the registry gives
//     that provider with nil attributes;
//   - anything else is NotFound: `pool "x" not found`.
func (m *Manager) VolumeParams(args VolumeArgs) (VolumeParams, error) {
	pool := args.Pool
	if pool == "" {
		var err error
		pool, err = DefaultPool(KindBlock, Constraints{Size: args.Size, Count: 1}, PoolDefaults{Block: args.DefaultBlockSource})
		if err != nil {
			return VolumeParams{}, err
		}
	}
	cfg, p, err := m.Resolve(pool)
	if err != nil {
		return VolumeParams{}, err
	}
	if err := validateAttrs(cfg, p); err != nil {
		return VolumeParams{}, fmt.Errorf("pool %q: %w", pool, err)
	}
	return VolumeParams{
		Pool:           pool,
		Size:           args.Size,
		Provider:       p.Type(),
		Attributes:     maps.Clone(cfg.Attrs),
		Tags:           maps.Clone(args.Tags),
		Dynamic:        p.Dynamic(),
		EnvironManaged: !IsCommonProvider(p.Type()),
		Attachment:     VolumeAttachmentParams{Provider: p.Type(), ReadOnly: args.ReadOnly},
	}, nil
}
