package storage

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/juju/errors"
)

// PoolStore keeps pool records. The state package implements it over its
// database; MemPoolStore keeps them in memory. Implementations must be
// safe for concurrent use, and each method must be atomic.
type PoolStore interface {
	// GetPool returns the pool called name, or an error satisfying
	// errors.Is(err, errors.NotFound).
	GetPool(name string) (Config, error)
	// PutPool stores cfg under cfg.Name. With replace false it creates a
	// new record, and fails with an error satisfying
	// errors.Is(err, errors.AlreadyExists) when the name is taken; with
	// replace true it overwrites an existing record, and fails with
	// errors.NotFound when there is none.
	PutPool(cfg Config, replace bool) error
	// DeletePool removes the pool called name, or fails with an error
	// satisfying errors.Is(err, errors.NotFound).
	DeletePool(name string) error
	// ListPools returns every pool, in any order.
	ListPools() ([]Config, error)
}

// MemPoolStore is a PoolStore in memory, safe for concurrent use. Its
// zero value is an empty store. It serves dry runs (provisionctl) and
// tests; nothing survives the process.
type MemPoolStore struct {
	mu    sync.Mutex
	pools map[string]Config
}

// GetPool implements PoolStore.
func (s *MemPoolStore) GetPool(name string) (Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cfg, ok := s.pools[name]
	if !ok {
		return Config{}, errors.NotFoundf("pool %q", name)
	}
	return cfg.clone(), nil
}

// PutPool implements PoolStore.
func (s *MemPoolStore) PutPool(cfg Config, replace bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, exists := s.pools[cfg.Name]
	switch {
	case exists && !replace:
		return errors.AlreadyExistsf("pool %q", cfg.Name)
	case !exists && replace:
		return errors.NotFoundf("pool %q", cfg.Name)
	}
	if s.pools == nil {
		s.pools = make(map[string]Config)
	}
	s.pools[cfg.Name] = cfg.clone()
	return nil
}

// DeletePool implements PoolStore.
func (s *MemPoolStore) DeletePool(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pools[name]; !ok {
		return errors.NotFoundf("pool %q", name)
	}
	delete(s.pools, name)
	return nil
}

// ListPools implements PoolStore; the pools come sorted by name.
func (s *MemPoolStore) ListPools() ([]Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Config, 0, len(s.pools))
	for _, cfg := range s.pools {
		out = append(out, cfg.clone())
	}
	sortPools(out)
	return out, nil
}

func sortPools(pools []Config) {
	slices.SortFunc(pools, func(a, b Config) int { return cmp.Compare(a.Name, b.Name) })
}

// Manager creates, reads and removes the pools of one model, validating
// them against the model's provider registry. It is safe for concurrent
// use when its store is.
type Manager struct {
	store    PoolStore
	registry *Registry
}

// NewManager returns a manager of the pools in store, whose providers come
// from registry.
func NewManager(store PoolStore, registry *Registry) *Manager {
	return &Manager{store: store, registry: registry}
}

// Registry returns the manager's provider registry.
func (m *Manager) Registry() *Registry { return m.registry }

// Validate checks a pool without storing it: the name (Juju's pool name
// rule), the provider type (it must be in the registry), the attributes
// every pool may carry, and the provider's own attributes. Errors:
//
//	pool name is missing                                  (NotValid)
//	pool name "x" not valid                               (NotValid)
//	provider type is missing                              (NotValid)
//	storage provider "x" not found                        (NotFound)
//	validating common storage config: persistent: ...     (NotValid)
//	machine scoped storage provider "x" does not support persistent storage (NotValid)
//	validating storage provider config: ...               (the provider's kind)
func (m *Manager) Validate(cfg Config) error {
	if cfg.Name == "" {
		return errors.NewNotValid(nil, "pool name is missing")
	}
	if !IsValidPoolName(cfg.Name) {
		return errors.NotValidf("pool name %q", cfg.Name)
	}
	if cfg.Provider == "" {
		return errors.NewNotValid(nil, "provider type is missing")
	}
	p, err := m.registry.Provider(cfg.Provider)
	if err != nil {
		return err
	}
	return validateAttrs(cfg, p)
}

// validateAttrs checks the attributes of pool cfg of provider p: those
// every pool may carry, then the provider's own.
func validateAttrs(cfg Config, p Provider) error {
	if err := validateCommon(cfg, p); err != nil {
		return err
	}
	if err := p.ValidateConfig(cfg.Attrs); err != nil {
		return fmt.Errorf("validating storage provider config: %w", err)
	}
	return nil
}

// Create validates and stores a new pool. A pool of that name already
// existing is an error satisfying errors.Is(err, errors.AlreadyExists):
// `creating pool "x": pool "x" already exists`. A pool may share its name
// with a provider type; it then hides the provider in Get.
func (m *Manager) Create(name string, provider ProviderType, attrs map[string]any) (Config, error) {
	cfg := Config{Name: name, Provider: provider, Attrs: attrs}.clone()
	if err := m.Validate(cfg); err != nil {
		return Config{}, err
	}
	if err := m.store.PutPool(cfg, false); err != nil {
		return Config{}, fmt.Errorf("creating pool %q: %w", name, err)
	}
	return cfg.clone(), nil
}

// Replace validates and stores new attributes (and, when provider is not
// empty, a new provider type) for an existing pool, as juju
// update-storage-pool. The pool must exist (NotFound otherwise).
func (m *Manager) Replace(name string, provider ProviderType, attrs map[string]any) (Config, error) {
	if provider == "" {
		old, err := m.Pool(name)
		if err != nil {
			return Config{}, err
		}
		provider = old.Provider
	}
	cfg := Config{Name: name, Provider: provider, Attrs: attrs}.clone()
	if err := m.Validate(cfg); err != nil {
		return Config{}, err
	}
	if err := m.store.PutPool(cfg, true); err != nil {
		return Config{}, fmt.Errorf("replacing pool %q: %w", name, err)
	}
	return cfg.clone(), nil
}

// Pool returns the stored pool called name, or an error satisfying
// errors.Is(err, errors.NotFound): `pool "name" not found`.
func (m *Manager) Pool(name string) (Config, error) {
	if name == "" {
		return Config{}, errors.NotFoundf("pool %q", name)
	}
	cfg, err := m.store.GetPool(name)
	if errors.Is(err, errors.NotFound) {
		return Config{}, errors.NotFoundf("pool %q", name)
	}
	if err != nil {
		return Config{}, fmt.Errorf("reading pool %q: %w", name, err)
	}
	return cfg, nil
}

// Get returns the pool called name. As in Juju, a name that is not a pool
// but is a provider type in the registry stands for that provider with no
// attributes: Config{Name: name, Provider: name, Attrs: nil}. Otherwise
// the error is Pool's NotFound.
func (m *Manager) Get(name string) (Config, error) {
	cfg, _, err := m.Resolve(name)
	return cfg, err
}

// Resolve is Get that also returns the pool's provider. A stored pool
// whose provider is not in the registry is an error satisfying
// errors.NotFound: `pool "x": storage provider "y" not found`.
func (m *Manager) Resolve(name string) (Config, Provider, error) {
	cfg, p, _, err := m.resolve(name)
	if err == nil && p == nil {
		_, err = m.registry.Provider(cfg.Provider)
		return Config{}, nil, fmt.Errorf("pool %q: %w", name, err)
	}
	return cfg, p, err
}

// resolve also reports whether name was resolved as a provider type. The
// provider of a stored pool is nil when the registry does not have it.
func (m *Manager) resolve(name string) (cfg Config, p Provider, byType bool, err error) {
	cfg, err = m.Pool(name)
	if errors.Is(err, errors.NotFound) {
		p, perr := m.registry.Provider(ProviderType(name))
		if perr != nil {
			return Config{}, nil, false, err // the pool's NotFound
		}
		return Config{Name: name, Provider: p.Type()}, p, true, nil
	}
	if err != nil {
		return Config{}, nil, false, err
	}
	p, _ = m.registry.Provider(cfg.Provider)
	return cfg, p, false, nil
}

// List returns the stored pools, sorted by name. Provider types that are
// not pools are not listed.
func (m *Manager) List() ([]Config, error) {
	pools, err := m.store.ListPools()
	if err != nil {
		return nil, fmt.Errorf("listing pools: %w", err)
	}
	sortPools(pools)
	return pools, nil
}

// Remove deletes the pool called name; a missing pool is an error
// satisfying errors.Is(err, errors.NotFound): `storage pool "x" not found`.
//
// Remove does not know what uses the pool: refusing to remove a pool that
// storage constraints, volumes or filesystems still name (Juju: `storage
// pool "x" in use`) is the caller's job, done in the same transaction as
// the removal.
func (m *Manager) Remove(name string) error {
	err := m.store.DeletePool(name)
	if errors.Is(err, errors.NotFound) {
		return errors.NotFoundf("storage pool %q", name)
	}
	if err != nil {
		return fmt.Errorf("deleting pool %q: %w", name, err)
	}
	return nil
}

// EnsureDefaultPools creates the default pools of every provider in the
// registry that do not exist yet (Juju does this at bootstrap and on
// upgrade). Existing pools of the same names are left alone.
func (m *Manager) EnsureDefaultPools() error {
	for _, p := range m.registry.Providers() {
		for _, pool := range p.DefaultPools() {
			_, err := m.Pool(pool.Name)
			if err == nil {
				continue
			}
			if !errors.Is(err, errors.NotFound) {
				return fmt.Errorf("loading default pool %q: %w", pool.Name, err)
			}
			_, err = m.Create(pool.Name, pool.Provider, pool.Attrs)
			if err != nil && !errors.Is(err, errors.AlreadyExists) {
				return fmt.Errorf("creating default pool %q: %w", pool.Name, err)
			}
		}
	}
	return nil
}
