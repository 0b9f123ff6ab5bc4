package state

import (
	"context"
	"fmt"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// DestroyModelParams say how DestroyModel treats the model's storage, as
// Juju's destroy-model (state/model.go DestroyModelParams.DestroyStorage).
type DestroyModelParams struct {
	// DestroyStorage is nil when the caller said nothing: a model holding
	// persistent storage is then refused (ErrPersistentStorage); true
	// destroys the model's storage, false releases it (left in the
	// cloud). Storage bound to its host (storage.Detachable is false) is
	// destroyed with the model whatever is said.
	DestroyStorage *bool
}

// ModelDestroyed is what DestroyModel did.
type ModelDestroyed struct {
	// Model is the model as it was last stored (Life dying, or dead when
	// removed).
	Model Model
	// Removed reports whether the model is gone.
	Removed bool
	// Storage is the storage this call took out of the model: destroyed,
	// or released.
	Storage []DisposedStorage
}

// DestroyModel removes a model as Juju's destroy-model does.
//
// Its first transaction decides (beginDestroyModel): the controller model
// is refused; a model that holds persistent storage (filesystems or
// volumes that outlive their hosts: Kubernetes persistent volumes) is
// refused unless p says to destroy or release it (ErrPersistentStorage,
// and nothing changes), as is releasing storage whose provider cannot
// release it; otherwise the model becomes dying (it accepts no new
// entities), p's decision is stored with it, and an empty model is removed
// at once.
//
// Then its entities go: each application is destroyed (DestroyApplication:
// units removed at once, their storage detached; a Kubernetes application
// dead, waiting for its unit provisioner, an IAAS one removed), the
// top-level machines become dying with everything they host
// (DestroyMachines with force), and the model's detached storage is taken
// out (destroyed or released as decided; storage bound to its host is
// destroyed). The agents tear down what is dying and dead (the
// provisioners remove dead machines, whose volumes go with them; the unit
// provisioner clears a dead application's cluster resources), and the
// model goes with its last entity.
//
// Each step is its own transaction and each is idempotent: DestroyModel
// on a dying model carries on where an interrupted call stopped (a
// decision given then replaces the stored one; the stored one applies
// otherwise).
func (st *State) DestroyModel(ctx context.Context, uuid string, p DestroyModelParams) (ModelDestroyed, error) {
	m, removed, err := st.beginDestroyModel(ctx, uuid, p.DestroyStorage)
	if err != nil || removed {
		return ModelDestroyed{Model: m, Removed: removed}, err
	}
	out := ModelDestroyed{Model: m}
	gone := func(err error) bool { return errors.Is(err, errors.NotFound) }
	done := func(err error) (ModelDestroyed, error) {
		out.Removed = gone(err)
		if out.Removed {
			out.Model.Life = Dead
		}
		return out, ignore(err, gone)
	}
	apps, err := st.Applications(ctx, uuid)
	if err != nil {
		return done(err)
	}
	for _, a := range apps {
		if _, err := st.DestroyApplication(ctx, uuid, a.Name, false); err != nil && !gone(err) {
			return out, err
		}
	}
	ms, err := st.Machines(ctx, uuid)
	if err != nil {
		return done(err)
	}
	var top []string
	for _, mc := range ms {
		if !IsController(mc) && ParentID(mc.ID) == "" {
			top = append(top, mc.ID)
		}
	}
	if len(top) > 0 {
		if _, err := st.DestroyMachines(ctx, uuid, top, true); err != nil && !gone(err) {
			return out, err
		}
	}
	if out.Storage, err = st.disposeDetachedStorage(ctx, uuid); err != nil {
		return done(err)
	}
	_, err = st.Model(ctx, uuid)
	return done(err)
}

// beginDestroyModel is DestroyModel's first transaction (see there). An
// alive model becomes dying; a dying model that holds no entity is
// removed, with its name (which may then be reused) and its sequences. A
// dying model that still holds entities is removed in the transaction
// that removes its last entity (see txn.remove). On a dying model it
// changes nothing unless a new decision about storage is given, and
// reports the model again. removed reports whether the model is gone; m is
// the model as it was last stored (Life dying, or dead when removed).
func (st *State) beginDestroyModel(ctx context.Context, uuid string, destroyStorage *bool) (m Model, removed bool, err error) {
	err = st.update(ctx, func(tx *txn) error {
		removed = false
		ctrl, err := getController(tx)
		if err != nil {
			return err
		}
		d, err := getModel(tx, uuid)
		if err != nil {
			return err
		}
		if uuid == ctrl.ModelUUID {
			return errors.Forbiddenf("cannot remove the controller model")
		}
		decision := d.DestroyStorage
		if destroyStorage != nil {
			decision = destroyStorage
		}
		empty, err := tx.modelEmpty(uuid)
		if err != nil {
			return err
		}
		if !empty {
			if err := tx.checkModelStorage(uuid, decision); err != nil {
				return err
			}
		}
		var fields []string
		if d.Life == Alive {
			d.Life = Dying
			fields = append(fields, watcher.FieldLife)
		}
		if destroyStorage != nil && (d.DestroyStorage == nil || *d.DestroyStorage != *destroyStorage) {
			v := *destroyStorage
			d.DestroyStorage = &v
			fields = append(fields, "destroy-storage")
		}
		if len(fields) > 0 {
			if err := tx.put(KindModel, uuid, uuid, &d, fields...); err != nil {
				return err
			}
		}
		m = d.model()
		if empty {
			removed = true
			m.Life = Dead
			return tx.removeModel(&d)
		}
		if len(fields) == 0 {
			return errNoChange
		}
		return nil
	})
	if err != nil {
		return Model{}, false, err
	}
	return m, removed, nil
}

// checkModelStorage refuses to destroy a model holding persistent storage
// without a decision about it (Juju's
// checkModelEntityRefsNoPersistentStorage), and to release storage whose
// provider cannot release it (checkModelEntityRefsAllReleasableStorage).
func (tx *txn) checkModelStorage(uuid string, decision *bool) error {
	if decision != nil && *decision {
		return nil
	}
	kinds, err := newStorageKinds(tx, uuid)
	if err != nil {
		return err
	}
	fss, err := list[filesystemDoc](tx, KindFilesystem, uuid)
	if err != nil {
		return err
	}
	vols, err := list[volumeDoc](tx, KindVolume, uuid)
	if err != nil {
		return err
	}
	var nfs, nvol int
	for _, f := range fss {
		if !kinds.detachable(f.Pool) {
			continue
		}
		nfs++
		if decision != nil {
			if err := kinds.checkReleasable("filesystem "+f.ID, f.Pool); err != nil {
				return err
			}
		}
	}
	for _, v := range vols {
		if !kinds.detachable(v.Pool) {
			continue
		}
		nvol++
		if decision != nil {
			if err := kinds.checkReleasable("volume "+v.ID, v.Pool); err != nil {
				return err
			}
		}
	}
	if decision != nil || nfs+nvol == 0 {
		return nil
	}
	// Juju's destroy-model names the counts this way: volumes first.
	var what []string
	if nvol > 0 {
		what = append(what, plural(nvol, "volume"))
	}
	if nfs > 0 {
		what = append(what, plural(nfs, "filesystem"))
	}
	return &kindError{fmt.Sprintf("%s: %s", ErrPersistentStorage, strings.Join(what, " and ")), ErrPersistentStorage}
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// detachedStorage names one storage instance, filesystem or volume that is
// attached to nothing.
type detachedStorage struct {
	kind string // "storage", "filesystem", "volume"
	id   string
}

// disposeDetachedStorage takes a dying model's detached storage out of it,
// as decided (disposal), each storage instance (with its filesystem and
// volume), orphaned filesystem (with its volume) or orphaned volume in a
// part of one transaction of its own (bulk). The storage is read again
// in each part: what was attached meanwhile stays.
func (st *State) disposeDetachedStorage(ctx context.Context, uuid string) ([]DisposedStorage, error) {
	var items []detachedStorage
	err := st.view(ctx, func(r reader) error {
		var err error
		items, err = detachedStorageOf(r, uuid)
		return err
	})
	if err != nil || len(items) == 0 {
		return nil, err
	}
	outs := make([]removal, len(items))
	errs := st.bulk(ctx, len(items), func(tx *txn, i int) error {
		outs[i] = removal{}
		return tx.disposeDetached(uuid, items[i], &outs[i])
	})
	var disposed []DisposedStorage
	for i, err := range errs {
		if err != nil && !errors.Is(err, errors.NotFound) {
			return disposed, errors.Annotatef(err, "removing %s %s", items[i].kind, items[i].id)
		}
		disposed = append(disposed, outs[i].storage...)
	}
	return disposed, nil
}

// detachedStorageOf lists a model's storage that is attached to nothing:
// storage instances without a unit, filesystems without an attachment or
// storage instance, volumes without attachments that back no filesystem.
func detachedStorageOf(r reader, uuid string) ([]detachedStorage, error) {
	sis, err := list[storageInstanceDoc](r, KindStorageInstance, uuid)
	if err != nil {
		return nil, err
	}
	fss, err := list[filesystemDoc](r, KindFilesystem, uuid)
	if err != nil {
		return nil, err
	}
	vols, err := list[volumeDoc](r, KindVolume, uuid)
	if err != nil {
		return nil, err
	}
	var out []detachedStorage
	instances := map[string]bool{}
	for _, si := range sis {
		instances[si.ID] = true
		if si.Unit == "" {
			out = append(out, detachedStorage{"storage", si.ID})
		}
	}
	backing := map[string]bool{}
	for _, f := range fss {
		if f.VolumeID != "" {
			backing[f.VolumeID] = true
		}
		if f.Attachment == nil && !instances[f.StorageID] {
			out = append(out, detachedStorage{"filesystem", f.ID})
		}
	}
	for _, v := range vols {
		if len(v.Attachments) == 0 && !backing[v.ID] {
			out = append(out, detachedStorage{"volume", v.ID})
		}
	}
	return out, nil
}

// disposeDetached takes one detached item out of a dying model, as
// disposal decides; errNoChange when it stays (attached meanwhile, or
// persistent storage with no decision about it).
func (tx *txn) disposeDetached(uuid string, item detachedStorage, out *removal) error {
	d, err := getModel(tx, uuid)
	if err != nil {
		return err
	}
	kinds, err := newStorageKinds(tx, uuid)
	if err != nil {
		return err
	}
	switch item.kind {
	case "storage":
		si, err := getStorageInstance(tx, uuid, item.id)
		if err != nil || si.Unit != "" {
			return ignoreAttached(err)
		}
		pool, err := instancePool(tx, uuid, si.ID)
		if err != nil {
			return err
		}
		dispose, release := kinds.disposal(d, pool)
		if !dispose {
			return errNoChange
		}
		return tx.disposeStorageInstance(uuid, si, release, out)
	case "filesystem":
		var fs filesystemDoc
		if ok, err := get(tx, KindFilesystem, uuid, item.id, &fs); err != nil || !ok || fs.Attachment != nil {
			return ignoreAttached(err)
		}
		dispose, release := kinds.disposal(d, fs.Pool)
		if !dispose {
			return errNoChange
		}
		return tx.disposeFilesystem(uuid, fs, release, out)
	default:
		v, err := getVolume(tx, uuid, item.id)
		if err != nil || len(v.Attachments) > 0 {
			return ignoreAttached(err)
		}
		dispose, release := kinds.disposal(d, v.Pool)
		if !dispose {
			return errNoChange
		}
		return tx.disposeVolume(uuid, v, release, out)
	}
}

// ignoreAttached is errNoChange for a nil error (the item is attached now)
// and for a missing one, else err.
func ignoreAttached(err error) error {
	if err == nil || errors.Is(err, errors.NotFound) {
		return errNoChange
	}
	return err
}

// disposal decides what becomes of detached storage of pool in model d:
// storage bound to its host is destroyed with it; persistent storage is
// destroyed or released once the model is dying with a decision about it,
// and kept otherwise.
func (k storageKinds) disposal(d modelDoc, pool string) (dispose, release bool) {
	if !k.detachable(pool) {
		return true, false
	}
	if d.Life == Alive || d.DestroyStorage == nil {
		return false, false
	}
	return true, !*d.DestroyStorage
}

// ignore is nil when is(err), else err.
func ignore(err error, is func(error) bool) error {
	if is(err) {
		return nil
	}
	return err
}
