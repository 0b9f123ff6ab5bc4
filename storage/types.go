package storage

// ProviderType names a storage provider: "kubernetes", "rootfs", "tmpfs",
// "loop", ... A pool names its provider by type, and a pool name that is
// not a pool but is a provider type stands for that provider with no
// attributes.
type ProviderType string

// The provider types of the built-in providers.
const (
	ProviderKubernetes ProviderType = "kubernetes"
	ProviderRootfs     ProviderType = "rootfs"
	ProviderTmpfs      ProviderType = "tmpfs"
	ProviderLoop       ProviderType = "loop"
)

// Scope is where a provider's storage lives: managed by the environ (the
// cloud or the Kubernetes cluster, independent of any machine) or by a
// machine (it dies with the machine).
type Scope string

const (
	ScopeEnviron Scope = "environ"
	ScopeMachine Scope = "machine"
)

// Kind is the kind of storage a charm asks for. The values are the charm
// metadata's storage types.
type Kind string

const (
	KindBlock      Kind = "block"
	KindFilesystem Kind = "filesystem"
)

// Pool attribute names understood by this package.
const (
	// AttrPersistent ("persistent", a boolean) asks for storage that
	// outlives the machine it is attached to; machine-scoped providers
	// refuse it.
	AttrPersistent = "persistent"

	// AttrStorageClass is the Kubernetes storage class of a kubernetes
	// pool's persistent volumes.
	AttrStorageClass = "storage-class"
	// AttrStorageProvisioner is the provisioner of a storage class that
	// Juju creates when it does not exist; it needs AttrStorageClass.
	AttrStorageProvisioner = "storage-provisioner"
	// AttrStorageMode is the access mode of a persistent volume claim:
	// ReadWriteOnce (RWO, the default), ReadWriteMany (RWX) or
	// ReadOnlyMany (ROX).
	AttrStorageMode = "storage-mode"
	// AttrStorageMedium is the medium of a Kubernetes emptyDir volume:
	// Memory or HugePages.
	AttrStorageMedium = "storage-medium"
	// ParametersPrefix prefixes the attributes passed to a created
	// storage class as its parameters, e.g. "parameters.type=pd-ssd".
	ParametersPrefix = "parameters."
)

// Model config keys that choose storage.
const (
	// WorkloadStorageKey is the model config key of a CAAS model's
	// default storage class (or pool name) for charm storage.
	WorkloadStorageKey = "workload-storage"
	// OperatorStorageKey is the model config key of the storage class
	// used for operator storage.
	OperatorStorageKey = "operator-storage"
	// DefaultBlockSourceKey and DefaultFilesystemSourceKey are the model
	// config keys of the default pools for block and filesystem storage.
	DefaultBlockSourceKey      = "storage-default-block-source"
	DefaultFilesystemSourceKey = "storage-default-filesystem-source"
)

// Kubernetes values.
const (
	// StorageModeReadWriteOnce and friends are the canonical access modes.
	StorageModeReadWriteOnce = "ReadWriteOnce"
	StorageModeReadWriteMany = "ReadWriteMany"
	StorageModeReadOnlyMany  = "ReadOnlyMany"

	// StorageMediumMemory (tmpfs) and StorageMediumHugePages are the
	// emptyDir media Juju accepts.
	StorageMediumMemory    = "Memory"
	StorageMediumHugePages = "HugePages"

	// ReclaimRetain is the reclaim policy of the persistent volumes Juju
	// creates for charm storage: they are kept when released.
	ReclaimRetain = "Retain"
)
