package state

import (
	"context"
	"maps"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/storage"
	"github.com/provisiond/provisiond/watcher"
)

// StorageRegistry is the storage provider registry of a model type:
// kubernetes plus the common providers for CAAS, the common providers and
// the built-in environ's (storage.BuiltinEnvironProviders) for IAAS.
func StorageRegistry(t ModelType) *storage.Registry {
	if t == ModelTypeCAAS {
		return storage.KubernetesRegistry()
	}
	r, err := storage.MachineRegistry(storage.BuiltinEnvironProviders()...)
	if err != nil {
		panic(err) // the providers have distinct types
	}
	return r
}

// StorageManager returns the pool manager of a model: its pools are kept
// in the state's storage pool records, validated against the model type's
// registry. A pool name that is a provider type resolves to the provider.
func (st *State) StorageManager(ctx context.Context, model string) (*storage.Manager, error) {
	m, err := st.Model(ctx, model)
	if err != nil {
		return nil, err
	}
	return storage.NewManager(st.PoolStore(ctx, model), StorageRegistry(m.Type)), nil
}

// PoolStore returns the storage.PoolStore of a model's pools, for the
// call ctx belongs to: each of its calls is one transaction under ctx
// (storage.PoolStore's methods take none).
func (st *State) PoolStore(ctx context.Context, model string) storage.PoolStore {
	return poolStore{ctx: ctx, st: st, model: model}
}

type poolStore struct {
	ctx   context.Context // the call's: storage.PoolStore's methods take none
	st    *State
	model string
}

func poolConfig(p StoragePool) storage.Config {
	return storage.Config{Name: p.Name, Provider: storage.ProviderType(p.Provider), Attrs: maps.Clone(p.Attrs)}
}

func getPool(r reader, model, name string) (storage.Config, error) {
	var d storagePoolDoc
	ok, err := get(r, KindStoragePool, model, name, &d)
	if err != nil {
		return storage.Config{}, err
	}
	if !ok {
		return storage.Config{}, errors.NotFoundf("pool %q", name)
	}
	return poolConfig(d.StoragePool), nil
}

func listPools(r reader, model string) ([]storage.Config, error) {
	docs, err := list[storagePoolDoc](r, KindStoragePool, model)
	out := make([]storage.Config, 0, len(docs))
	for _, d := range docs {
		out = append(out, poolConfig(d.StoragePool))
	}
	return out, err
}

// GetPool implements storage.PoolStore.
func (s poolStore) GetPool(name string) (storage.Config, error) {
	var cfg storage.Config
	err := s.st.view(s.ctx, func(r reader) error {
		var err error
		cfg, err = getPool(r, s.model, name)
		return err
	})
	return cfg, err
}

// ListPools implements storage.PoolStore; the pools come sorted by name.
func (s poolStore) ListPools() ([]storage.Config, error) {
	var out []storage.Config
	err := s.st.view(s.ctx, func(r reader) error {
		var err error
		out, err = listPools(r, s.model)
		return err
	})
	return out, err
}

// PutPool implements storage.PoolStore.
func (s poolStore) PutPool(cfg storage.Config, replace bool) error {
	attrs, err := normalizeConfig(cfg.Attrs)
	if err != nil {
		return err
	}
	return s.st.update(s.ctx, func(tx *txn) error {
		if _, err := getModelHead(tx, s.model); err != nil {
			return err
		}
		exists, err := exists(tx, KindStoragePool, s.model, cfg.Name)
		if err != nil {
			return err
		}
		switch {
		case exists && !replace:
			return errors.AlreadyExistsf("pool %q", cfg.Name)
		case !exists && replace:
			return errors.NotFoundf("pool %q", cfg.Name)
		}
		field := watcher.FieldCreated
		if exists {
			field = FieldConfig
		}
		return tx.put(KindStoragePool, s.model, cfg.Name, &storagePoolDoc{StoragePool: StoragePool{
			Model: s.model, Name: cfg.Name, Provider: string(cfg.Provider), Attrs: attrs}}, field)
	})
}

// DeletePool implements storage.PoolStore. A pool that storage
// constraints, filesystems or volumes of the model still name is not
// removed: `storage pool "x" in use`.
func (s poolStore) DeletePool(name string) error {
	return s.st.update(s.ctx, func(tx *txn) error {
		if ok, err := exists(tx, KindStoragePool, s.model, name); err != nil {
			return err
		} else if !ok {
			return errors.NotFoundf("pool %q", name)
		}
		inUse := errors.Errorf("storage pool %q in use", name)
		apps, err := list[applicationDoc](tx, KindApplication, s.model)
		if err != nil {
			return err
		}
		for _, a := range apps {
			for _, c := range a.StorageConstraints {
				if c.Pool == name {
					return inUse
				}
			}
		}
		fss, err := list[filesystemDoc](tx, KindFilesystem, s.model)
		if err != nil {
			return err
		}
		for _, f := range fss {
			if f.Pool == name {
				return inUse
			}
		}
		vols, err := list[volumeDoc](tx, KindVolume, s.model)
		if err != nil {
			return err
		}
		for _, v := range vols {
			if v.Pool == name {
				return inUse
			}
		}
		return tx.remove(KindStoragePool, s.model, name)
	})
}

// txPoolStore reads pools inside a transaction (for the storage.Manager
// state uses while writing); it cannot write.
type txPoolStore struct {
	r     reader
	model string
}

func (s txPoolStore) GetPool(name string) (storage.Config, error) { return getPool(s.r, s.model, name) }
func (s txPoolStore) ListPools() ([]storage.Config, error)        { return listPools(s.r, s.model) }
func (s txPoolStore) PutPool(storage.Config, bool) error {
	return errors.NotSupportedf("writing pools inside a transaction")
}
func (s txPoolStore) DeletePool(string) error {
	return errors.NotSupportedf("removing pools inside a transaction")
}
