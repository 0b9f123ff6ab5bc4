package modeladmin

import (
	"context"
	"fmt"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func registerStorageRemoval(m *methods) {
	rpc.Handle(m, "RemoveStorage", (*ModelAdmin).RemoveStorage)
	rpc.Handle(m, "DetachStorage", (*ModelAdmin).DetachStorage)
}

// storageIDs checks the storage ids of a call: at least one, each a
// storage id as Juju's ("data/0").
func storageIDs(ids []string) error {
	if len(ids) == 0 {
		return errors.NewNotValid(nil, "no storage given")
	}
	for _, id := range ids {
		if !names.IsValidStorage(id) {
			return errors.NewNotValid(nil, fmt.Sprintf("storage id %q not valid (want NAME/N, such as data/0)", id))
		}
	}
	return nil
}

// RemoveStorage takes storage instances out of a model with their
// filesystems and volumes, as Juju's remove-storage (state's
// RemoveStorage, one transaction, all or none): destroyed, or released
// with no-destroy (left in the cloud, no longer managed). Storage attached
// to a unit is refused (code "storage is attached") unless force, which
// detaches it first.
func (a *ModelAdmin) RemoveStorage(ctx context.Context, args params.RemoveStorageArgs) (params.RemoveStorageResult, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.RemoveStorageResult{}, err
	}
	if err := storageIDs(args.Storage); err != nil {
		return params.RemoveStorageResult{}, err
	}
	res, err := a.st.RemoveStorage(ctx, m.UUID, args.Storage, state.RemoveStorageParams{Force: args.Force, Release: args.NoDestroy})
	if err != nil {
		return params.RemoveStorageResult{}, err
	}
	return params.RemoveStorageResult{Removed: removedStorage(res)}, nil
}

// DetachStorage detaches storage instances from their units, as Juju's
// detach-storage (state's DetachStorage, one transaction, all or none):
// the storage stays in the model, detached, until removed. Storage already
// detached is left as it is (and not listed).
func (a *ModelAdmin) DetachStorage(ctx context.Context, args params.DetachStorageArgs) (params.DetachStorageResult, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.DetachStorageResult{}, err
	}
	if err := storageIDs(args.Storage); err != nil {
		return params.DetachStorageResult{}, err
	}
	res, err := a.st.DetachStorage(ctx, m.UUID, args.Storage)
	if err != nil {
		return params.DetachStorageResult{}, err
	}
	return params.DetachStorageResult{Detached: orEmpty(res)}, nil
}

// removedStorage converts what state took out of a model.
func removedStorage(in []state.DisposedStorage) []params.RemovedStorage {
	out := make([]params.RemovedStorage, 0, len(in))
	for _, d := range in {
		out = append(out, params.RemovedStorage{Kind: d.Kind, ID: d.ID, ProviderID: d.ProviderID, Released: d.Released})
	}
	return out
}
