package state

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
	"github.com/provisiond/provisiond/watcher"
)

// StorageInstance is an instance of charm storage ("<name>/<n>") of a
// Kubernetes unit.
type StorageInstance struct {
	Model       string `json:"model"`
	ID          string `json:"id"`
	StorageName string `json:"storage-name"`
	Kind        string `json:"kind"` // "filesystem"
	// Owner is the unit owning the instance ("" once the unit is gone:
	// the storage is detached and kept).
	Owner string `json:"owner,omitempty"`
	// Unit is the unit the instance is attached to ("" when detached).
	Unit string `json:"unit,omitempty"`
	Life Life   `json:"life"`
}

type storageInstanceDoc struct {
	StorageInstance
}

// FilesystemInfo describes a provisioned filesystem.
type FilesystemInfo struct {
	Size         uint64 `json:"size"`
	Pool         string `json:"pool,omitempty"`
	FilesystemID string `json:"filesystem-id"`
}

// FilesystemAttachmentInfo describes a provisioned attachment.
type FilesystemAttachmentInfo struct {
	MountPoint string `json:"mount-point,omitempty"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// FilesystemAttachment attaches a filesystem to a unit.
type FilesystemAttachment struct {
	Unit     string                    `json:"unit"`
	Location string                    `json:"location,omitempty"`
	ReadOnly bool                      `json:"read-only,omitempty"`
	Info     *FilesystemAttachmentInfo `json:"info,omitempty"`
}

// Filesystem is a filesystem of a Kubernetes unit's storage (id
// "<unit>/<n>", tag "filesystem-<unit>-<n>").
type Filesystem struct {
	Model      string                `json:"model"`
	ID         string                `json:"id"`
	StorageID  string                `json:"storage-id,omitempty"`
	VolumeID   string                `json:"volume-id,omitempty"` // the backing volume, if any
	Pool       string                `json:"pool"`
	Size       uint64                `json:"size"`
	Info       *FilesystemInfo       `json:"info,omitempty"`
	Status     Status                `json:"status,omitzero"`
	Life       Life                  `json:"life"`
	Attachment *FilesystemAttachment `json:"attachment,omitempty"`
}

type filesystemDoc struct {
	Filesystem
}

// FilesystemTag is the tag string of filesystem id.
func FilesystemTag(id string) string { return "filesystem-" + strings.ReplaceAll(id, "/", "-") }

// VolumeTag is the tag string of volume id.
func VolumeTag(id string) string { return "volume-" + strings.ReplaceAll(id, "/", "-") }

// seqOf is the number after the last "/" of an id (-1 if none).
func seqOf(id string) int {
	n, err := strconv.Atoi(id[strings.LastIndex(id, "/")+1:])
	if err != nil {
		return -1
	}
	return n
}

// StorageInstances returns a model's storage instances in creation order.
func (st *State) StorageInstances(ctx context.Context, model string) ([]StorageInstance, error) {
	var out []StorageInstance
	err := st.view(ctx, func(r reader) error {
		docs, err := list[storageInstanceDoc](r, KindStorageInstance, model)
		for _, d := range docs {
			out = append(out, d.StorageInstance)
		}
		return err
	})
	slices.SortFunc(out, func(a, b StorageInstance) int { return cmp.Compare(seqOf(a.ID), seqOf(b.ID)) })
	return out, err
}

// Filesystems returns a model's filesystems, sorted by tag.
func (st *State) Filesystems(ctx context.Context, model string) ([]Filesystem, error) {
	var out []Filesystem
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = allFilesystems(r, model)
		return err
	})
	return out, err
}

func allFilesystems(r reader, model string) ([]Filesystem, error) {
	docs, err := list[filesystemDoc](r, KindFilesystem, model)
	out := make([]Filesystem, 0, len(docs))
	for _, d := range docs {
		out = append(out, d.Filesystem)
	}
	slices.SortFunc(out, func(a, b Filesystem) int { return strings.Compare(FilesystemTag(a.ID), FilesystemTag(b.ID)) })
	return out, err
}

// Volumes returns a model's volumes, sorted by tag.
func (st *State) Volumes(ctx context.Context, model string) ([]Volume, error) {
	var out []Volume
	err := st.view(ctx, func(r reader) error {
		docs, err := list[volumeDoc](r, KindVolume, model)
		for _, d := range docs {
			out = append(out, d.Volume)
		}
		return err
	})
	slices.SortFunc(out, func(a, b Volume) int { return strings.Compare(VolumeTag(a.ID), VolumeTag(b.ID)) })
	return out, err
}

// unitStorage returns the storage instances attached to a unit, in
// creation order.
func unitStorage(r reader, model, unit string) ([]storageInstanceDoc, error) {
	docs, err := list[storageInstanceDoc](r, KindStorageInstance, model)
	if err != nil {
		return nil, err
	}
	var out []storageInstanceDoc
	for _, d := range docs {
		if d.Unit == unit {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b storageInstanceDoc) int { return cmp.Compare(seqOf(a.ID), seqOf(b.ID)) })
	return out, nil
}

// instanceFilesystem returns the filesystem of a storage instance.
func instanceFilesystem(r reader, model, storageID string) (filesystemDoc, error) {
	docs, err := list[filesystemDoc](r, KindFilesystem, model)
	if err != nil {
		return filesystemDoc{}, err
	}
	for _, d := range docs {
		if d.StorageID == storageID {
			return d, nil
		}
	}
	return filesystemDoc{}, errors.NotFoundf("filesystem for storage instance %q", storageID)
}

// addUnitStorage makes the storage of a new unit from the application's
// storage constraints, in sorted storage name order: per instance a
// storage instance, a filesystem (backed by a volume when the pool's
// provider makes block storage, as kubernetes persistent volumes) and
// their attachments.
func (tx *txn) addUnitStorage(a applicationDoc, unit string) error {
	if len(a.StorageConstraints) == 0 {
		return nil
	}
	m, err := getModel(tx, a.Model)
	if err != nil {
		return err
	}
	class, _ := m.Config["workload-storage"].(string)
	var ch charmDoc
	if _, err := get(tx, KindCharm, a.Model, a.CharmURL, &ch); err != nil {
		return err
	}
	mgr := storage.NewManager(txPoolStore{r: tx, model: a.Model}, storage.KubernetesRegistry())
	for _, name := range slices.Sorted(maps.Keys(a.StorageConstraints)) {
		cons := a.StorageConstraints[name]
		provider, _, err := mgr.CharmStorageParams(cons.Pool, class)
		if err != nil {
			return errors.Annotatef(err, "storage %q of unit %q", name, unit)
		}
		p, err := mgr.Registry().Provider(provider)
		if err != nil {
			return err
		}
		pool := cons.Pool
		if pool == "" {
			pool = string(provider)
		}
		var cs storage.CharmStorage
		if ch.Meta != nil {
			if s, ok := ch.Meta.Storage[name]; ok {
				cs = storage.CharmStorage{Name: name, Kind: storage.Kind(s.Type), ReadOnly: s.ReadOnly,
					Location: s.Location, CountMin: s.CountMin, CountMax: s.CountMax, MinimumSize: s.MinimumSize}
			}
		}
		for range cons.Count {
			seq, err := tx.nextSequence(a.Model, "storage/"+name)
			if err != nil {
				return err
			}
			sid := fmt.Sprintf("%s/%d", name, seq)
			if err := tx.put(KindStorageInstance, a.Model, sid, &storageInstanceDoc{StorageInstance: StorageInstance{
				Model: a.Model, ID: sid, StorageName: name, Kind: string(storage.KindFilesystem),
				Owner: unit, Unit: unit, Life: Alive}}, watcher.FieldCreated); err != nil {
				return err
			}
			mp, err := storage.FilesystemMountPoint(cs, sid)
			if err != nil {
				return err
			}
			fseq, err := tx.nextSequence(a.Model, "filesystem/"+unit)
			if err != nil {
				return err
			}
			fs := Filesystem{Model: a.Model, ID: fmt.Sprintf("%s/%d", unit, fseq), StorageID: sid, Pool: pool,
				Size: cons.Size, Life: Alive, Status: Status{Status: "pending", Since: tx.now},
				Attachment: &FilesystemAttachment{Unit: unit, Location: mp, ReadOnly: cs.ReadOnly}}
			if p.Supports(storage.KindBlock) {
				vseq, err := tx.nextSequence(a.Model, string(KindVolume))
				if err != nil {
					return err
				}
				v := Volume{Model: a.Model, ID: strconv.Itoa(vseq), Life: Alive, Pool: pool, Size: cons.Size,
					StorageID: sid, Status: Status{Status: "pending", Since: tx.now},
					Attachments: []VolumeAttachment{{Unit: unit, ReadOnly: cs.ReadOnly}}}
				if err := tx.put(KindVolume, a.Model, v.ID, &volumeDoc{Volume: v}, watcher.FieldCreated); err != nil {
					return err
				}
				fs.VolumeID = v.ID
			}
			if err := tx.put(KindFilesystem, a.Model, fs.ID, &filesystemDoc{Filesystem: fs}, watcher.FieldCreated); err != nil {
				return err
			}
		}
	}
	return nil
}

// detachUnitStorage detaches the storage of a removed unit
// (detachStorageInstance): the storage itself is kept. The filesystems'
// status is left to the caller.
func (tx *txn) detachUnitStorage(model, unit string) error {
	sis, err := unitStorage(tx, model, unit)
	if err != nil {
		return err
	}
	for _, si := range sis {
		if err := tx.detachStorageInstance(model, si, false); err != nil {
			return err
		}
	}
	return nil
}

// validateStorageStatus applies Juju's rules for filesystem and volume
// statuses.
func validateStorageStatus(s Status, provisioned bool) error {
	switch s.Status {
	case "attaching", "attached", "detaching", "detached", "destroying":
	case "error":
		if s.Message == "" {
			return errors.Errorf("cannot set status %q without info", s.Status)
		}
	case "pending":
		if provisioned {
			return errors.Errorf("cannot set status %q", s.Status)
		}
	default:
		return errors.Errorf("cannot set invalid status %q", s.Status)
	}
	return nil
}
