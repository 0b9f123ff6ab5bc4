package storage

import (
	"fmt"
	"slices"
	"strings"

	"github.com/juju/errors"
)

// KubernetesProvider makes persistent volumes in a Kubernetes cluster.
//
// Attributes: storage-class (the claim's storage class), storage-provisioner
// (needs storage-class: Juju creates that class with this provisioner when
// it is missing), parameters.* (the class's parameters), storage-mode
// (RWO/ReadWriteOnce, RWX/ReadWriteMany, ROX/ReadOnlyMany).
//
// It is environ-scoped and dynamic. Juju's provider reports block support
// (a persistent volume is a volume) while the CAAS facades ask it for
// filesystems (the volume is mounted into the pod); it supports both.
type KubernetesProvider struct{}

func (KubernetesProvider) Type() ProviderType     { return ProviderKubernetes }
func (KubernetesProvider) Scope() Scope           { return ScopeEnviron }
func (KubernetesProvider) Dynamic() bool          { return true }
func (KubernetesProvider) Releasable() bool       { return true }
func (KubernetesProvider) Supports(k Kind) bool   { return k == KindFilesystem || k == KindBlock }
func (KubernetesProvider) DefaultPools() []Config { return nil }

// ValidateConfig checks storage-class, storage-provisioner and storage-mode.
func (KubernetesProvider) ValidateConfig(attrs map[string]any) error {
	return validateKubernetesAttrs(attrs)
}

// Params reads the persistent volume parameters.
func (KubernetesProvider) Params(attrs map[string]any) (Params, error) {
	class, provisioner, err := kubernetesClass(attrs)
	if err != nil {
		return Params{}, err
	}
	mode, err := storageMode(attrs)
	if err != nil {
		return Params{}, err
	}
	p := Params{
		Provider:           ProviderKubernetes,
		Persistent:         true,
		StorageClass:       class,
		StorageProvisioner: provisioner,
		Parameters:         map[string]string{},
		ReclaimPolicy:      ReclaimRetain,
		AccessMode:         mode,
	}
	for k, v := range attrs {
		if name, ok := strings.CutPrefix(k, ParametersPrefix); ok {
			p.Parameters[name] = fmt.Sprint(v)
		}
	}
	return p, nil
}

func validateKubernetesAttrs(attrs map[string]any) error {
	if _, _, err := kubernetesClass(attrs); err != nil {
		return err
	}
	_, err := storageMode(attrs)
	return err
}

func kubernetesClass(attrs map[string]any) (class, provisioner string, err error) {
	if class, err = stringAttr(attrs, AttrStorageClass); err != nil {
		return "", "", errors.NewNotValid(err, "validating storage config")
	}
	if provisioner, err = stringAttr(attrs, AttrStorageProvisioner); err != nil {
		return "", "", errors.NewNotValid(err, "validating storage config")
	}
	if provisioner != "" && class == "" {
		return "", "", errors.NewNotValid(nil, "storage-class must be specified if storage-provisioner is specified")
	}
	return class, provisioner, nil
}

// storageMode returns the canonical access mode of storage-mode.
func storageMode(attrs map[string]any) (string, error) {
	mode, err := stringAttr(attrs, AttrStorageMode)
	if err != nil {
		return "", errors.NewNotValid(err, "validating storage mode")
	}
	switch mode {
	case "", StorageModeReadWriteOnce, "RWO":
		return StorageModeReadWriteOnce, nil
	case StorageModeReadWriteMany, "RWX":
		return StorageModeReadWriteMany, nil
	case StorageModeReadOnlyMany, "ROX":
		return StorageModeReadOnlyMany, nil
	}
	return "", errors.NotSupportedf("storage mode %q", mode)
}

// RootfsProvider makes filesystems in a directory of the machine's root
// filesystem (in a Kubernetes model: an emptyDir on the node's disk).
// Machine-scoped, dynamic, filesystems only, no attributes of its own.
type RootfsProvider struct{}

func (RootfsProvider) Type() ProviderType                  { return ProviderRootfs }
func (RootfsProvider) Scope() Scope                        { return ScopeMachine }
func (RootfsProvider) Dynamic() bool                       { return true }
func (RootfsProvider) Releasable() bool                    { return false }
func (RootfsProvider) Supports(k Kind) bool                { return k == KindFilesystem }
func (RootfsProvider) DefaultPools() []Config              { return nil }
func (RootfsProvider) ValidateConfig(map[string]any) error { return nil }

// Params: an emptyDir on the node's disk.
func (RootfsProvider) Params(map[string]any) (Params, error) {
	return Params{Provider: ProviderRootfs, EmptyDir: true}, nil
}

// TmpfsProvider makes memory-backed filesystems (in a Kubernetes model: an
// emptyDir of medium Memory, or the pool's storage-medium).
// Machine-scoped, dynamic, filesystems only, no attributes of its own.
type TmpfsProvider struct{}

func (TmpfsProvider) Type() ProviderType                  { return ProviderTmpfs }
func (TmpfsProvider) Scope() Scope                        { return ScopeMachine }
func (TmpfsProvider) Dynamic() bool                       { return true }
func (TmpfsProvider) Releasable() bool                    { return false }
func (TmpfsProvider) Supports(k Kind) bool                { return k == KindFilesystem }
func (TmpfsProvider) DefaultPools() []Config              { return nil }
func (TmpfsProvider) ValidateConfig(map[string]any) error { return nil }

// Params: an emptyDir of medium Memory unless storage-medium is set.
func (TmpfsProvider) Params(attrs map[string]any) (Params, error) {
	medium := StorageMediumMemory
	if v, ok := attrs[AttrStorageMedium]; ok {
		medium = fmt.Sprint(v)
	}
	return Params{Provider: ProviderTmpfs, EmptyDir: true, Medium: medium}, nil
}

// LoopProvider makes block devices backed by files on the machine (loop
// devices). Machine-scoped, dynamic, block only, no attributes of its own.
type LoopProvider struct{}

func (LoopProvider) Type() ProviderType                  { return ProviderLoop }
func (LoopProvider) Scope() Scope                        { return ScopeMachine }
func (LoopProvider) Dynamic() bool                       { return true }
func (LoopProvider) Releasable() bool                    { return false }
func (LoopProvider) Supports(k Kind) bool                { return k == KindBlock }
func (LoopProvider) DefaultPools() []Config              { return nil }
func (LoopProvider) ValidateConfig(map[string]any) error { return nil }

// Params: a loop device, not persistent.
func (LoopProvider) Params(map[string]any) (Params, error) {
	return Params{Provider: ProviderLoop}, nil
}

// BasicProvider is a provider described by its fields, with no attributes
// of its own. The built-in environ uses it to declare provider types such
// as a static (non-dynamic) one whose volumes the machine provisioner
// creates with the instance, as Juju's dummy environ does.
type BasicProvider struct {
	ProviderType  ProviderType
	ProviderScope Scope
	IsDynamic     bool
	IsReleasable  bool
	Kinds         []Kind
	Pools         []Config
}

func (p BasicProvider) Type() ProviderType                  { return p.ProviderType }
func (p BasicProvider) Scope() Scope                        { return p.ProviderScope }
func (p BasicProvider) Dynamic() bool                       { return p.IsDynamic }
func (p BasicProvider) Releasable() bool                    { return p.IsReleasable }
func (p BasicProvider) Supports(k Kind) bool                { return slices.Contains(p.Kinds, k) }
func (p BasicProvider) ValidateConfig(map[string]any) error { return nil }

// DefaultPools returns copies of Pools.
func (p BasicProvider) DefaultPools() []Config {
	out := make([]Config, len(p.Pools))
	for i, c := range p.Pools {
		out[i] = c.clone()
	}
	return out
}

// Params: the provider type and the pool's persistent attribute.
func (p BasicProvider) Params(attrs map[string]any) (Params, error) {
	persistent, err := boolAttr(attrs, AttrPersistent)
	if err != nil {
		return Params{}, errors.NewNotValid(err, "validating common storage config")
	}
	return Params{Provider: p.ProviderType, Persistent: persistent}, nil
}
