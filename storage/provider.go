package storage

import (
	"fmt"
	"maps"
	"slices"

	"github.com/juju/errors"
)

// Provider is a kind of storage source: it validates the attributes of
// the pools that use it and says what those attributes mean for the
// filesystems and volumes it makes. Providers hold no state and are safe
// for concurrent use.
type Provider interface {
	// Type is the provider's name, unique within a Registry.
	Type() ProviderType
	// Scope says whether the provider's storage is managed by the environ
	// or by the machine it is attached to.
	Scope() Scope
	// Dynamic reports whether storage can be made and attached after the
	// machine starts (by the storage provisioner). Static storage is made
	// with the instance, so the machine provisioner asks for it in
	// ProvisioningInfo.
	Dynamic() bool
	// Releasable reports whether the provider's storage can be released
	// from a model (left in the cloud, no longer managed) rather than
	// destroyed, as Juju's destroy-model --release-storage and
	// remove-storage --no-destroy do.
	Releasable() bool
	// Supports reports whether the provider makes storage of kind k.
	Supports(k Kind) bool
	// ValidateConfig checks the provider-specific attributes of a pool.
	// The attributes every pool may carry ("persistent") are checked by
	// the Manager.
	ValidateConfig(attrs map[string]any) error
	// DefaultPools are the pools the provider brings along, created by
	// Manager.EnsureDefaultPools. Most providers have none.
	DefaultPools() []Config
	// Params reads a pool's attributes into the parameters of the storage
	// the provider makes from it. The attributes must be valid.
	Params(attrs map[string]any) (Params, error)
}

// Params is what a provider makes of a pool's attributes for one
// filesystem or volume. Only the fields of the provider's own kind are set.
type Params struct {
	Provider ProviderType
	// Persistent storage outlives the machine (or pod) it is attached to.
	Persistent bool

	// Kubernetes persistent volumes (provider "kubernetes").

	// StorageClass is the class of the persistent volume claim.
	StorageClass string
	// StorageProvisioner, when set, is the provisioner of the storage
	// class Juju creates if it does not exist.
	StorageProvisioner string
	// Parameters are the parameters of that storage class: the
	// "parameters.*" attributes with the prefix cut off, values formatted
	// as strings. Never nil for kubernetes.
	Parameters map[string]string
	// ReclaimPolicy is always ReclaimRetain: Juju keeps charm storage.
	ReclaimPolicy string
	// AccessMode is the claim's access mode, canonical form
	// (StorageModeReadWriteOnce unless storage-mode says otherwise).
	AccessMode string

	// Kubernetes emptyDir volumes (providers "rootfs" and "tmpfs" in a
	// Kubernetes model).

	// EmptyDir is true for rootfs and tmpfs.
	EmptyDir bool
	// Medium is the emptyDir medium: StorageMediumMemory for tmpfs unless
	// the pool's storage-medium says otherwise; "" (node disk) for rootfs.
	Medium string
}

// Detachable reports whether storage of provider p outlives the machine
// or unit it is attached to (Juju's detachable, "persistent" storage: its
// volumes and filesystems have no host): the provider is environ-scoped
// and dynamic. Other storage is bound to its host and destroyed with it.
func Detachable(p Provider) bool {
	return p.Scope() == ScopeEnviron && p.Dynamic()
}

// Registry is a fixed set of providers, looked up by type. It is not
// changed after NewRegistry, so it is safe for concurrent use.
type Registry struct {
	providers map[ProviderType]Provider
}

// NewRegistry makes a registry of the given providers. Two providers of
// one type, or a provider with an empty type, are an error.
func NewRegistry(providers ...Provider) (*Registry, error) {
	r := &Registry{providers: make(map[ProviderType]Provider, len(providers))}
	for _, p := range providers {
		t := p.Type()
		if t == "" {
			return nil, errors.NotValidf("empty storage provider type")
		}
		if _, dup := r.providers[t]; dup {
			return nil, errors.AlreadyExistsf("storage provider %q", t)
		}
		r.providers[t] = p
	}
	return r, nil
}

func mustRegistry(providers ...Provider) *Registry {
	r, err := NewRegistry(providers...)
	if err != nil {
		panic(err)
	}
	return r
}

// CommonProviders are the providers of every model, as Juju's: loop,
// rootfs and tmpfs.
func CommonProviders() []Provider {
	return []Provider{LoopProvider{}, RootfsProvider{}, TmpfsProvider{}}
}

// KubernetesRegistry is the registry of a Kubernetes (CAAS) model: the
// kubernetes provider and the common ones.
func KubernetesRegistry() *Registry {
	return mustRegistry(append([]Provider{KubernetesProvider{}}, CommonProviders()...)...)
}

// MachineRegistry is the registry of a machine (IAAS) model on the
// built-in environ: the common providers plus extra, for instance a
// static provider that the environ provisions with the instance.
func MachineRegistry(extra ...Provider) (*Registry, error) {
	return NewRegistry(append(CommonProviders(), extra...)...)
}

// Provider returns the provider of type t, or an error satisfying
// errors.Is(err, errors.NotFound): `storage provider "t" not found`.
func (r *Registry) Provider(t ProviderType) (Provider, error) {
	if p, ok := r.providers[t]; ok {
		return p, nil
	}
	return nil, errors.NotFoundf("storage provider %q", t)
}

// Providers returns the providers, sorted by type.
func (r *Registry) Providers() []Provider {
	out := make([]Provider, 0, len(r.providers))
	for _, t := range r.Types() {
		out = append(out, r.providers[t])
	}
	return out
}

// Types returns the provider types, sorted.
func (r *Registry) Types() []ProviderType {
	return slices.Sorted(maps.Keys(r.providers))
}

// ValidateForKubernetes checks that the pool attributes attrs of provider
// p may be used for charm storage in a Kubernetes model, as Juju does when
// storage is added to a CAAS application: only the kubernetes, rootfs and
// tmpfs providers can, a storage-medium must be Memory or HugePages, and
// the persistent volume attributes must be valid.
func ValidateForKubernetes(p Provider, attrs map[string]any) error {
	switch p.Type() {
	case ProviderKubernetes, ProviderRootfs, ProviderTmpfs:
	default:
		return errors.NotValidf("storage provider type %q", p.Type())
	}
	if len(attrs) == 0 {
		return nil
	}
	if v, ok := attrs[AttrStorageMedium]; ok {
		if m := fmt.Sprint(v); m != StorageMediumMemory && m != StorageMediumHugePages {
			return errors.NotValidf("storage medium %q", m)
		}
	}
	return validateKubernetesAttrs(attrs)
}
