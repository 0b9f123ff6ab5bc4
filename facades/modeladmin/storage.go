package modeladmin

import (
	"context"
	"fmt"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/storage"
)

func registerStorage(m *methods) {
	rpc.Handle(m, "CreateStoragePool", (*ModelAdmin).CreateStoragePool)
	rpc.Handle(m, "StoragePools", (*ModelAdmin).StoragePools)
	rpc.Handle(m, "RemoveStoragePool", (*ModelAdmin).RemoveStoragePool)
}

func poolInfo(c storage.Config) params.StoragePoolInfo {
	return params.StoragePoolInfo{Name: c.Name, Provider: string(c.Provider), Attrs: c.Attrs}
}

// CreateStoragePool adds a pool to an alive model: a name (Juju's pool
// name rule), a provider of the model type's registry (kubernetes, loop,
// rootfs, tmpfs in a CAAS model; loop, rootfs, tmpfs in an IAAS model)
// and attributes the provider accepts (string, number or boolean values).
func (a *ModelAdmin) CreateStoragePool(ctx context.Context, args params.CreateStoragePoolArgs) (params.StoragePoolInfo, error) {
	if err := validateConfig(args.Attrs, nil, nil); err != nil {
		return params.StoragePoolInfo{}, errors.Annotate(err, "pool attributes")
	}
	m, err := a.aliveModel(ctx, args.Model, "a storage pool")
	if err != nil {
		return params.StoragePoolInfo{}, err
	}
	mgr, err := a.st.StorageManager(ctx, m.UUID)
	if err != nil {
		return params.StoragePoolInfo{}, err
	}
	cfg, err := mgr.Create(args.Name, storage.ProviderType(args.Provider), args.Attrs)
	if err != nil {
		return params.StoragePoolInfo{}, err
	}
	return poolInfo(cfg), nil
}

// StoragePools lists a model's pools, by name (provider types that are not
// pools are not listed).
func (a *ModelAdmin) StoragePools(ctx context.Context, args params.ModelArgs) (params.StoragePoolsResult, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.StoragePoolsResult{}, err
	}
	return a.storagePools(ctx, m)
}

// storagePools is StoragePools of a resolved model.
func (a *ModelAdmin) storagePools(ctx context.Context, m state.Model) (params.StoragePoolsResult, error) {
	mgr, err := a.st.StorageManager(ctx, m.UUID)
	if err != nil {
		return params.StoragePoolsResult{}, err
	}
	pools, err := mgr.List()
	if err != nil {
		return params.StoragePoolsResult{}, err
	}
	out := params.StoragePoolsResult{Pools: []params.StoragePoolInfo{}}
	for _, p := range pools {
		out.Pools = append(out.Pools, poolInfo(p))
	}
	return out, nil
}

// RemoveStoragePool removes a pool and returns it as it was. A pool that
// storage constraints, filesystems or volumes of the model name is kept
// (`storage pool "x" in use`).
func (a *ModelAdmin) RemoveStoragePool(ctx context.Context, args params.RemoveStoragePoolArgs) (params.StoragePoolInfo, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.StoragePoolInfo{}, err
	}
	mgr, err := a.st.StorageManager(ctx, m.UUID)
	if err != nil {
		return params.StoragePoolInfo{}, err
	}
	cfg, err := mgr.Pool(args.Name)
	if errors.Is(err, errors.NotFound) {
		return params.StoragePoolInfo{}, errors.NewNotFound(nil, fmt.Sprintf("storage pool %q not found", args.Name))
	}
	if err != nil {
		return params.StoragePoolInfo{}, err
	}
	if err := mgr.Remove(args.Name); err != nil {
		return params.StoragePoolInfo{}, err
	}
	return poolInfo(cfg), nil
}
