package state

import (
	"context"
	"slices"
	"strconv"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// VolumeParams asks for a volume (a storage constraint of a machine).
type VolumeParams struct {
	Pool     string // a storage pool name, or a provider type
	Size     uint64 // MiB
	ReadOnly bool   // of the attachment
}

// VolumeInfo describes a provisioned volume.
type VolumeInfo struct {
	VolumeID   string `json:"volume-id"`
	HardwareID string `json:"hardware-id,omitempty"`
	WWN        string `json:"wwn,omitempty"`
	Size       uint64 `json:"size"`
	Persistent bool   `json:"persistent,omitempty"`
	Pool       string `json:"pool,omitempty"`
}

// VolumeAttachmentInfo describes a provisioned attachment.
type VolumeAttachmentInfo struct {
	DeviceName string `json:"device-name,omitempty"`
	DeviceLink string `json:"device-link,omitempty"`
	BusAddress string `json:"bus-address,omitempty"`
	ReadOnly   bool   `json:"read-only,omitempty"`
}

// VolumeAttachment attaches a volume to a machine.
type VolumeAttachment struct {
	Machine string `json:"machine"`
	// Unit is set instead of Machine for the volumes of Kubernetes units.
	Unit     string                `json:"unit,omitempty"`
	ReadOnly bool                  `json:"read-only,omitempty"`
	Info     *VolumeAttachmentInfo `json:"info,omitempty"`
}

// Volume is a model's volume (tag "volume-<id>").
type Volume struct {
	Model       string             `json:"model"`
	ID          string             `json:"id"`
	Life        Life               `json:"life"`
	Pool        string             `json:"pool"`
	Size        uint64             `json:"size"`
	Info        *VolumeInfo        `json:"info,omitempty"`
	Attachments []VolumeAttachment `json:"attachments,omitempty"`
	// StorageID is the storage instance the volume backs (Kubernetes
	// units' storage), and Status the volume's status.
	StorageID string `json:"storage-id,omitempty"`
	Status    Status `json:"status,omitzero"`
}

type volumeDoc struct {
	Volume
}

// StoragePool is a named storage configuration.
type StoragePool struct {
	Model    string         `json:"model"`
	Name     string         `json:"name"`
	Provider string         `json:"provider"`
	Attrs    map[string]any `json:"attrs,omitempty"`
}

type storagePoolDoc struct {
	StoragePool
}

func (tx *txn) addVolume(model, machine string, p VolumeParams) (Volume, error) {
	seq, err := tx.nextSequence(model, string(KindVolume))
	if err != nil {
		return Volume{}, err
	}
	v := Volume{Model: model, ID: strconv.Itoa(seq), Life: Alive, Pool: p.Pool, Size: p.Size,
		Attachments: []VolumeAttachment{{Machine: machine, ReadOnly: p.ReadOnly}}}
	return v, tx.put(KindVolume, model, v.ID, &volumeDoc{Volume: v}, watcher.FieldCreated)
}

func getVolume(r reader, model, id string) (volumeDoc, error) {
	var d volumeDoc
	ok, err := get(r, KindVolume, model, id, &d)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, errors.NotFoundf("volume %s", id)
	}
	return d, nil
}

func (tx *txn) setVolumeInfo(model, id string, info VolumeInfo) error {
	d, err := getVolume(tx, model, id)
	if err != nil {
		return err
	}
	if info.VolumeID == "" {
		return errors.NotValidf("volume %s info without a volume id", id)
	}
	if info.Pool == "" {
		info.Pool = d.Pool // the volume keeps its pool
	}
	d.Info = &info
	return tx.put(KindVolume, model, id, &d, "info")
}

func (tx *txn) setVolumeAttachmentInfo(model, id, machine string, info VolumeAttachmentInfo) error {
	d, err := getVolume(tx, model, id)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(d.Attachments, func(a VolumeAttachment) bool { return a.Machine == machine })
	if i < 0 {
		return errors.NotFoundf("volume %s attachment to machine %s", id, machine)
	}
	d.Attachments[i].Info = &info
	return tx.put(KindVolume, model, id, &d, "attachment")
}

// MachineVolumes returns the volumes attached to machine id, in id order.
func (st *State) MachineVolumes(ctx context.Context, model, machine string) ([]Volume, error) {
	var out []Volume
	err := st.view(ctx, func(r reader) error {
		docs, err := list[volumeDoc](r, KindVolume, model)
		if err != nil {
			return err
		}
		for _, d := range docs {
			for _, a := range d.Attachments {
				if a.Machine == machine {
					out = append(out, d.Volume)
					break
				}
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Volume) int { return compareMachineIDs(a.ID, b.ID) })
	return out, err
}

// AddStoragePool adds a named storage pool to a model.
func (st *State) AddStoragePool(ctx context.Context, model, name, provider string, attrs map[string]any) error {
	if name == "" || provider == "" {
		return errors.NotValidf("storage pool without a name or provider")
	}
	attrs, err := normalizeConfig(attrs)
	if err != nil {
		return err
	}
	return st.update(ctx, func(tx *txn) error {
		if _, err := getModelHead(tx, model); err != nil {
			return err
		}
		if ok, err := exists(tx, KindStoragePool, model, name); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("storage pool %q", name)
		}
		return tx.put(KindStoragePool, model, name, &storagePoolDoc{StoragePool: StoragePool{
			Model: model, Name: name, Provider: provider, Attrs: attrs}}, watcher.FieldCreated)
	})
}

// StoragePool returns a named pool.
func (st *State) StoragePool(ctx context.Context, model, name string) (StoragePool, error) {
	var d storagePoolDoc
	err := st.view(ctx, func(r reader) error {
		ok, err := get(r, KindStoragePool, model, name, &d)
		if err == nil && !ok {
			err = errors.NotFoundf("storage pool %q", name)
		}
		return err
	})
	return d.StoragePool, err
}

// detachVolumes drops the attachments of volumes to a removed machine.
// A volume left attached to nothing goes with the machine when it is bound
// to it (its provider is machine-scoped or static: storage.Detachable), as
// Juju destroys a dying machine's non-detachable storage; in a dying model
// told what to do with its storage, persistent volumes go as decided
// (model_destroy.go); any other is kept, detached.
func (tx *txn) detachVolumes(model, machine string) error {
	docs, err := list[volumeDoc](tx, KindVolume, model)
	if err != nil {
		return err
	}
	var kinds *storageKinds
	var md modelDoc
	for _, d := range docs {
		n := len(d.Attachments)
		d.Attachments = slices.DeleteFunc(d.Attachments, func(a VolumeAttachment) bool { return a.Machine == machine })
		if len(d.Attachments) == n {
			continue
		}
		if len(d.Attachments) == 0 && d.StorageID == "" {
			if kinds == nil {
				k, err := newStorageKinds(tx, model)
				if err != nil {
					return err
				}
				if md, err = getModel(tx, model); err != nil {
					return err
				}
				kinds = &k
			}
			if dispose, release := kinds.disposal(md, d.Pool); dispose {
				if err := tx.disposeVolume(model, d, release, &removal{}); err != nil {
					return err
				}
				continue
			}
		}
		if err := tx.put(KindVolume, model, d.ID, &d, "attachment"); err != nil {
			return err
		}
	}
	return nil
}
