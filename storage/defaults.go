package storage

import (
	"fmt"
	"path"
	"strings"

	"github.com/juju/errors"
)

// CharmStorage is what this package needs of one storage entry of a
// charm's metadata.
type CharmStorage struct {
	Name        string
	Kind        Kind
	ReadOnly    bool
	Location    string // mount point asked for by the charm; "" for none
	CountMin    int
	CountMax    int    // -1: no maximum
	MinimumSize uint64 // MiB; 0 for none
}

// DefaultStorageSize is the size, in MiB, of storage whose constraints
// and charm give none: 1 GiB, as Juju.
const DefaultStorageSize = 1024

// ErrNoDefaultPool is returned when storage of an unknown kind has no
// pool: there is no default for it.
var ErrNoDefaultPool = errors.New("no storage pool specified and no default available")

// PoolDefaults are a model's defaults for the pool of storage constraints
// that name none.
type PoolDefaults struct {
	// Block and Filesystem are the model config values of
	// storage-default-block-source and storage-default-filesystem-source
	// ("" when unset).
	Block      string
	Filesystem string
	// Kubernetes is set for a CAAS model: its fallback pool is the
	// kubernetes provider, not loop or rootfs.
	Kubernetes bool
}

// DefaultPool is the pool Juju picks for storage of kind k when cons name
// none:
//   - no constraints at all (the zero value): the fallback, loop for block
//     and rootfs for filesystems (kubernetes in a Kubernetes model);
//   - block: the model's default block source, else the fallback;
//   - filesystem: the default filesystem source, else the default block
//     source (a filesystem is made on the volume), else the fallback.
//
// Another kind is ErrNoDefaultPool.
func DefaultPool(k Kind, cons Constraints, d PoolDefaults) (string, error) {
	var fallback ProviderType
	switch k {
	case KindBlock:
		fallback = ProviderLoop
	case KindFilesystem:
		fallback = ProviderRootfs
	default:
		return "", ErrNoDefaultPool
	}
	if d.Kubernetes {
		fallback = ProviderKubernetes
	}
	if cons == (Constraints{}) {
		return string(fallback), nil
	}
	if k == KindFilesystem && d.Filesystem != "" {
		return d.Filesystem, nil
	}
	if d.Block != "" {
		return d.Block, nil
	}
	return string(fallback), nil
}

// ConstraintsWithDefaults fills in what cons leave out, as Juju does when
// an application is deployed: the pool from DefaultPool, the size from
// the charm's minimum size or DefaultStorageSize, the count from the
// charm's minimum count. An error reads
// `finding default pool for "<name>" storage: ...`.
func ConstraintsWithDefaults(cs CharmStorage, cons Constraints, d PoolDefaults) (Constraints, error) {
	out := cons
	if cons.Pool == "" {
		pool, err := DefaultPool(cs.Kind, cons, d)
		if err != nil {
			return cons, fmt.Errorf("finding default pool for %q storage: %w", cs.Name, err)
		}
		out.Pool = pool
	}
	if cons.Size == 0 {
		out.Size = cs.MinimumSize
		if out.Size == 0 {
			out.Size = DefaultStorageSize
		}
	}
	if cons.Count == 0 && cs.CountMin > 0 {
		out.Count = uint64(cs.CountMin)
	}
	return out, nil
}

// StorageDir is where Juju mounts charm storage that asks for no location
// (the same on machines and in Kubernetes pods).
const StorageDir = "/var/lib/juju/storage"

// FilesystemMountPoint is where the filesystem of storage instance
// storageID ("<name>/<n>") of charm storage cs is mounted:
//   - a charm location with a maximum count of 1: the location itself;
//   - a charm location otherwise: <location>/<storageID>;
//   - no location: StorageDir/<storageID>.
//
// A location that starts with StorageDir is refused (NotValid):
// `invalid location "<loc>": must not fall within "/var/lib/juju/storage"`.
// As in Juju the test is on the string prefix.
func FilesystemMountPoint(cs CharmStorage, storageID string) (string, error) {
	if strings.HasPrefix(cs.Location, StorageDir) {
		return "", errors.NewNotValid(nil, fmt.Sprintf(
			"invalid location %q: must not fall within %q", cs.Location, StorageDir))
	}
	if cs.Location != "" && cs.CountMax == 1 {
		return cs.Location, nil
	}
	dir := StorageDir
	if cs.Location != "" {
		dir = cs.Location
	}
	return path.Join(dir, storageID), nil
}
