package state

import (
	"context"
	"fmt"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
)

// Storage removal: detaching a storage instance from its unit, and taking
// storage out of the model, destroyed or released, as Juju's
// detach-storage, remove-storage and destroy-model --destroy-storage /
// --release-storage (state/storage.go DetachStorage, DestroyStorageInstance,
// ReleaseStorageInstance; state/model.go destroyOps).
//
// provisiond runs no storage provisioner of its own, so what Juju's would
// do once storage is dying is done in the same transaction: destroyed
// storage is removed from the model (the cloud's volumes are the cloud's:
// a Kubernetes persistent volume is reclaimed by its storage class);
// released storage is removed from the model too, and reported as released
// with its provider id (DisposedStorage.Released), so the operator knows
// what is left in the cloud, no longer managed, for another model to take
// over.

// Errors of storage removal, matched by the facades' error table.
var (
	// ErrStorageAttached: storage attached to a unit cannot be removed
	// without force (code "storage is attached").
	ErrStorageAttached = errors.New("storage is attached")
	// ErrPersistentStorage: a model holding persistent storage cannot be
	// destroyed without a decision about it (code "controller/model has
	// persistent storage"; Juju's text).
	ErrPersistentStorage = errors.New("model contains persistent storage")
)

// DisposedStorage is a storage instance, filesystem or volume taken out of
// a model.
type DisposedStorage struct {
	// Kind is "storage", "filesystem" or "volume".
	Kind string
	// ID is the storage id ("data/0"), filesystem id ("gitlab/0/0") or
	// volume id ("3").
	ID string
	// ProviderID is the cloud's id of a provisioned filesystem or volume.
	ProviderID string
	// Released is true when the storage was released: left in the cloud,
	// no longer managed. Otherwise it was destroyed.
	Released bool
}

// detachStorageInstance detaches a storage instance from its unit: the
// instance loses its owner and attachment, its filesystem and volume their
// attachments to the unit; mark also sets the filesystem's status
// "detached". The storage itself is kept.
func (tx *txn) detachStorageInstance(model string, si storageInstanceDoc, mark bool) error {
	unit := si.Unit
	si.Unit, si.Owner = "", ""
	if err := tx.put(KindStorageInstance, model, si.ID, &si, "attachment"); err != nil {
		return err
	}
	fs, err := instanceFilesystem(tx, model, si.ID)
	if errors.Is(err, errors.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	fs.Attachment = nil
	fields := []string{"attachment"}
	if mark {
		fs.Status = Status{Status: "detached", Since: tx.now}
		fields = append(fields, FieldStatus)
	}
	if err := tx.put(KindFilesystem, model, fs.ID, &fs, fields...); err != nil {
		return err
	}
	if fs.VolumeID == "" || unit == "" {
		return nil
	}
	v, err := getVolume(tx, model, fs.VolumeID)
	if err != nil {
		return err
	}
	v.Attachments = slices.DeleteFunc(v.Attachments, func(a VolumeAttachment) bool { return a.Unit == unit })
	return tx.put(KindVolume, model, v.ID, &v, "attachment")
}

// disposeStorageInstance takes a storage instance out of the model with
// its filesystem and the filesystem's backing volume: destroyed, or
// released.
func (tx *txn) disposeStorageInstance(model string, si storageInstanceDoc, release bool, out *removal) error {
	if err := tx.remove(KindStorageInstance, model, si.ID); err != nil {
		return err
	}
	out.storage = append(out.storage, DisposedStorage{Kind: "storage", ID: si.ID, Released: release})
	fs, err := instanceFilesystem(tx, model, si.ID)
	if errors.Is(err, errors.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return tx.disposeFilesystem(model, fs, release, out)
}

// disposeFilesystem takes a filesystem out of the model with its backing
// volume.
func (tx *txn) disposeFilesystem(model string, fs filesystemDoc, release bool, out *removal) error {
	if err := tx.remove(KindFilesystem, model, fs.ID); err != nil {
		return err
	}
	d := DisposedStorage{Kind: "filesystem", ID: fs.ID, Released: release}
	if fs.Info != nil {
		d.ProviderID = fs.Info.FilesystemID
	}
	out.storage = append(out.storage, d)
	if fs.VolumeID == "" {
		return nil
	}
	v, err := getVolume(tx, model, fs.VolumeID)
	if errors.Is(err, errors.NotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return tx.disposeVolume(model, v, release, out)
}

// disposeVolume takes a volume out of the model.
func (tx *txn) disposeVolume(model string, v volumeDoc, release bool, out *removal) error {
	if err := tx.remove(KindVolume, model, v.ID); err != nil {
		return err
	}
	d := DisposedStorage{Kind: "volume", ID: v.ID, Released: release}
	if v.Info != nil {
		d.ProviderID = v.Info.VolumeID
	}
	out.storage = append(out.storage, d)
	return nil
}

// storageKinds resolves the providers of a model's storage pools inside a
// transaction.
type storageKinds struct {
	mgr *storage.Manager
}

func newStorageKinds(tx reader, model string) (storageKinds, error) {
	m, err := getModelHead(tx, model)
	if err != nil {
		return storageKinds{}, err
	}
	return storageKinds{mgr: storage.NewManager(txPoolStore{r: tx, model: model}, StorageRegistry(m.Type))}, nil
}

// provider is the provider of a pool (a pool name or a provider type);
// nil when it cannot be resolved.
func (k storageKinds) provider(pool string) storage.Provider {
	_, p, err := k.mgr.Resolve(pool)
	if err != nil {
		return nil
	}
	return p
}

// detachable reports whether storage of pool outlives its host
// (storage.Detachable). Storage whose pool cannot be resolved counts as
// detachable: it is never destroyed without being asked.
func (k storageKinds) detachable(pool string) bool {
	p := k.provider(pool)
	return p == nil || storage.Detachable(p)
}

// checkReleasable refuses to release storage whose provider cannot leave it
// in the cloud (Juju's checkStoragePoolReleasable).
func (k storageKinds) checkReleasable(what, pool string) error {
	p := k.provider(pool)
	if p == nil || p.Releasable() {
		return nil
	}
	return errors.Errorf("cannot release %s: storage provider %q does not support releasing storage", what, p.Type())
}

// instancePool is the pool of a storage instance: its filesystem's.
func instancePool(r reader, model, id string) (string, error) {
	fs, err := instanceFilesystem(r, model, id)
	if errors.Is(err, errors.NotFound) {
		return "", nil
	}
	return fs.Pool, err
}

// RemoveStorageParams say how RemoveStorage takes storage out.
type RemoveStorageParams struct {
	// Force removes storage attached to a unit, detaching it first;
	// without it attached storage is refused (ErrStorageAttached).
	Force bool
	// Release leaves the storage in the cloud (released) instead of
	// destroying it.
	Release bool
}

// RemoveStorage takes storage instances out of a model with their
// filesystems and volumes, destroyed or released, as Juju's remove-storage
// (--force, --no-destroy), all in one transaction: all or none. Each id
// must name a storage instance; one attached to a unit is refused without
// force (`cannot destroy storage "data/0": storage is attached`), and with
// force is refused too when detaching it would take an alive unit below
// its charm's minimum count. Releasing storage whose provider cannot
// release it (rootfs, tmpfs) is refused. It returns what was taken out.
func (st *State) RemoveStorage(ctx context.Context, model string, ids []string, p RemoveStorageParams) ([]DisposedStorage, error) {
	verb := "destroy"
	if p.Release {
		verb = "release"
	}
	var out removal
	err := st.update(ctx, func(tx *txn) error {
		out = removal{}
		kinds, err := newStorageKinds(tx, model)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			si, err := getStorageInstance(tx, model, id)
			if err != nil {
				return err
			}
			fail := func(err error) error { return errors.Annotatef(err, "cannot %s storage %q", verb, id) }
			if si.Unit != "" {
				if !p.Force {
					return fail(ErrStorageAttached)
				}
				if err := tx.checkDetach(model, si); err != nil {
					return fail(err)
				}
			}
			if p.Release {
				pool, err := instancePool(tx, model, id)
				if err != nil {
					return err
				}
				if err := kinds.checkReleasable(fmt.Sprintf("storage %q", id), pool); err != nil {
					return err
				}
			}
			if si.Unit != "" {
				if err := tx.detachStorageInstance(model, si, true); err != nil {
					return err
				}
			}
			if err := tx.disposeStorageInstance(model, si, p.Release, &out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out.storage, nil
}

// DetachStorage detaches storage instances from their units, as Juju's
// detach-storage, all in one transaction: all or none. The storage stays
// in the model, detached, until an operator removes it (RemoveStorage) or
// the model goes. Each id must name a storage instance; one already
// detached is left as it is. Detaching from an alive unit is refused when
// it would take the unit below its charm's minimum count of that storage
// (Juju's text). It returns the ids detached, in the order given.
func (st *State) DetachStorage(ctx context.Context, model string, ids []string) ([]string, error) {
	var detached []string
	err := st.update(ctx, func(tx *txn) error {
		detached = nil
		if _, err := getModelHead(tx, model); err != nil {
			return err
		}
		for _, id := range ids {
			si, err := getStorageInstance(tx, model, id)
			if err != nil {
				return err
			}
			if si.Unit == "" {
				continue
			}
			if err := tx.checkDetach(model, si); err != nil {
				return errors.Annotatef(err, "cannot detach storage %q from unit %q", id, si.Unit)
			}
			if err := tx.detachStorageInstance(model, si, true); err != nil {
				return err
			}
			detached = append(detached, id)
		}
		if len(detached) == 0 {
			return errNoChange
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return detached, nil
}

func getStorageInstance(r reader, model, id string) (storageInstanceDoc, error) {
	var si storageInstanceDoc
	ok, err := get(r, KindStorageInstance, model, id, &si)
	if err != nil {
		return si, err
	}
	if !ok {
		return si, errors.NotFoundf("storage %q", id)
	}
	return si, nil
}

// checkDetach refuses to detach a storage instance from its alive unit
// when that takes the unit below the charm's minimum count of the storage
// (Juju's validateRemoveOwnerStorageInstanceOps).
func (tx *txn) checkDetach(model string, si storageInstanceDoc) error {
	u, err := getUnit(tx, model, si.Unit)
	if errors.Is(err, errors.NotFound) {
		return nil
	}
	if err != nil || u.Life != Alive {
		return err
	}
	a, err := getApplication(tx, model, u.Application)
	if err != nil {
		return err
	}
	var ch charmDoc
	if ok, err := get(tx, KindCharm, model, a.CharmURL, &ch); err != nil || !ok || ch.Meta == nil {
		return err
	}
	cs, ok := ch.Meta.Storage[si.StorageName]
	if !ok {
		return nil
	}
	sis, err := unitStorage(tx, model, si.Unit)
	if err != nil {
		return err
	}
	current := 0
	for _, s := range sis {
		if s.StorageName == si.StorageName {
			current++
		}
	}
	count := current - 1
	if cs.CountMin == 1 && cs.CountMax == 1 && count != 1 {
		return errors.New("cannot detach, storage is singular")
	}
	if count < cs.CountMin {
		return errors.Errorf("detaching 1 storage instance brings the total to %d, which is less than the minimum of %d", count, cs.CountMin)
	}
	return nil
}
