package state

import (
	"context"
	"maps"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/storage"
	"github.com/provisiond/provisiond/watcher"
)

// Fields of CAAS application changes.
const (
	FieldScale        = "scale"
	FieldCharm        = "charm"
	FieldConstraints  = "constraints"
	FieldHasResources = "has-resources"
	FieldPodSpec      = "podspec"
	// fieldHashPrefix carries an application config's new hash in the
	// change itself ("hash:<hex>"), so the trust hash watcher needs no read.
	fieldHashPrefix = "hash:"
)

// DeviceConstraints ask for Count devices of Type for each unit.
type DeviceConstraints struct {
	Type       string            `json:"type"`
	Count      int64             `json:"count"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// CAASApplication is what a Kubernetes application adds to Application.
type CAASApplication struct {
	// Scale is the desired number of units.
	Scale                int                            `json:"scale,omitempty"`
	CharmModifiedVersion int                            `json:"charm-modified-version,omitempty"`
	Constraints          Constraints                    `json:"constraints,omitzero"`
	StorageConstraints   map[string]storage.Constraints `json:"storage-constraints,omitempty"`
	DeviceConstraints    map[string]DeviceConstraints   `json:"device-constraints,omitempty"`
	// HasResources is true while the cluster may hold resources of the
	// application (cleared by ClearApplicationResources once it dies).
	HasResources bool `json:"has-resources,omitempty"`
}

// CAASApplicationParams describe a Kubernetes application for
// AddCAASApplication.
type CAASApplicationParams struct {
	Name  string
	Charm Charm
	// CharmModifiedVersion starts the application's counter of charm
	// changes.
	CharmModifiedVersion int
	// Scale is the desired number of units (no units are made: the
	// unit provisioner reports them as pods appear).
	Scale int
	// Config is the application config ("trust" among others).
	Config map[string]any
	// Trust sets config "trust" to true.
	Trust       bool
	Constraints Constraints
	// Storage are the storage constraints by charm storage name. Storage
	// the charm requires (count-min > 0) and that is not given gets its
	// minimum count; a missing size is the charm's minimum size or 1 GiB;
	// a missing pool stays empty (the model's workload-storage applies).
	Storage map[string]storage.Constraints
	Devices map[string]DeviceConstraints
	PodSpec string
	RawSpec string
}

// AddCAASApplication deploys a Kubernetes application in an alive CAAS
// model: its charm (stored once per URL; with no URL, a local charm whose
// URL the transaction picks: see deployCharm), the application with its scale,
// constraints, storage and device constraints, its config and, when
// given, its pod spec.
func (st *State) AddCAASApplication(ctx context.Context, model string, p CAASApplicationParams) (Application, error) {
	if !validApplicationName.MatchString(p.Name) {
		return Application{}, errors.NotValidf("application name %q", p.Name)
	}
	if p.Charm.Meta == nil {
		return Application{}, errors.NotValidf("application %q without charm metadata", p.Name)
	}
	if p.Scale < 0 {
		return Application{}, errors.NotValidf("application scale %d", p.Scale)
	}
	cfg, err := normalizeConfig(p.Config)
	if err != nil {
		return Application{}, err
	}
	if p.Trust {
		cfg["trust"] = true
	}
	if v, ok := cfg["trust"]; ok {
		if _, isBool := v.(bool); !isBool {
			return Application{}, errors.NotValidf("trust %v (want a bool)", v)
		}
	}
	cons, err := caasStorageConstraints(p.Charm.Meta, p.Storage)
	if err != nil {
		return Application{}, err
	}
	for name, d := range p.Devices {
		if _, ok := p.Charm.Meta.Devices[name]; !ok {
			return Application{}, errors.NotValidf("device %q (charm %q has no such device)", name, p.Charm.Meta.Name)
		}
		if d.Count <= 0 || d.Type == "" {
			return Application{}, errors.NotValidf("device %q constraints (type %q, count %d)", name, d.Type, d.Count)
		}
	}
	a := Application{Model: model, Name: p.Name, Life: Alive, CharmURL: p.Charm.URL,
		CharmRevision: p.Charm.Revision, Subordinate: p.Charm.Meta.Subordinate,
		CAASApplication: CAASApplication{
			Scale: p.Scale, CharmModifiedVersion: p.CharmModifiedVersion, Constraints: p.Constraints,
			StorageConstraints: cons, DeviceConstraints: maps.Clone(p.Devices), HasResources: true,
		}}
	err = st.update(ctx, func(tx *txn) error {
		m, err := getModel(tx, model)
		if err != nil {
			return err
		}
		if m.Type != ModelTypeCAAS {
			return errors.NotSupportedf("caas operation on non-caas model")
		}
		if m.Life != Alive {
			return errors.NotValidf("adding an application to %s model %q", m.Life, m.Name)
		}
		if ok, err := exists(tx, KindApplication, model, p.Name); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("application %q", p.Name)
		}
		mgr := storage.NewManager(txPoolStore{r: tx, model: model}, storage.KubernetesRegistry())
		class, _ := m.Config["workload-storage"].(string)
		for _, name := range slices.Sorted(maps.Keys(cons)) {
			if err := validateCAASPool(mgr, cons[name].Pool, class); err != nil {
				return errors.Annotatef(err, "storage %q", name)
			}
		}
		ch, err := tx.deployCharm(m, p.Charm)
		if err != nil {
			return err
		}
		a.CharmURL, a.CharmRevision = ch.URL, ch.Revision
		if err := tx.put(KindApplicationConfig, model, p.Name, &appConfigDoc{Settings: cfg},
			FieldConfig, fieldHashPrefix+configHash(p.Name, cfg)); err != nil {
			return err
		}
		if p.PodSpec != "" || p.RawSpec != "" {
			if err := tx.put(KindPodSpec, model, p.Name, &podSpecDoc{PodSpec: PodSpec{Spec: p.PodSpec, RawSpec: p.RawSpec}},
				watcher.FieldCreated); err != nil {
				return err
			}
		}
		return tx.put(KindApplication, model, p.Name, &applicationDoc{Application: a}, watcher.FieldCreated)
	})
	return a, err
}

// caasStorageConstraints fills in the defaults of storage constraints and
// checks them against the charm's storage. Kubernetes gives every instance
// a filesystem, so block storage is refused; a count left out is the
// charm's minimum.
func caasStorageConstraints(meta *charm.Meta, given map[string]storage.Constraints) (map[string]storage.Constraints, error) {
	return charmStorageConstraints(meta, given, 0, func(name string, cs charm.Storage) error {
		if cs.Type != charm.StorageFilesystem {
			return errors.NotSupportedf("%s storage %q on kubernetes", cs.Type, name)
		}
		return nil
	})
}

// charmStorageConstraints fills in the defaults of storage constraints
// (count: the charm's minimum, at least minCount; size: the charm's
// minimum, else storage.DefaultStorageSize) and checks them against the
// charm's storage, in name order. check, if not nil, refuses storage the
// model cannot hold. Storage the charm does not require and the caller
// did not name is left out.
func charmStorageConstraints(meta *charm.Meta, given map[string]storage.Constraints, minCount int,
	check func(name string, cs charm.Storage) error) (map[string]storage.Constraints, error) {
	out := map[string]storage.Constraints{}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if _, ok := meta.Storage[name]; !ok {
			return nil, errors.NotValidf("storage %q (charm %q has no such storage)", name, meta.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(meta.Storage)) {
		cs := meta.Storage[name]
		cons, ok := given[name]
		if !ok && cs.CountMin == 0 {
			continue
		}
		if check != nil {
			if err := check(name, cs); err != nil {
				return nil, err
			}
		}
		if cons.Count == 0 {
			cons.Count = uint64(max(cs.CountMin, minCount))
		}
		if cons.Size == 0 {
			cons.Size = cs.MinimumSize
			if cons.Size == 0 {
				cons.Size = storage.DefaultStorageSize
			}
		}
		if cons.Count < uint64(cs.CountMin) || (cs.CountMax >= 0 && cons.Count > uint64(cs.CountMax)) {
			return nil, errors.NotValidf("storage %q count %d (charm allows %d to %d)", name, cons.Count, cs.CountMin, cs.CountMax)
		}
		if cons.Size < cs.MinimumSize {
			return nil, errors.NotValidf("storage %q size %dM (charm needs at least %dM)", name, cons.Size, cs.MinimumSize)
		}
		out[name] = cons
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// validateCAASPool checks that a named pool can hold charm storage in a
// Kubernetes model.
func validateCAASPool(mgr *storage.Manager, pool, class string) error {
	if pool == "" {
		return nil
	}
	if _, _, err := mgr.CharmStorageParams(pool, class); err != nil {
		return err
	}
	cfg, p, err := mgr.Resolve(pool)
	if err != nil {
		return err
	}
	return storage.ValidateForKubernetes(p, cfg.Attrs)
}

// Applications returns the applications of a model, sorted by name.
func (st *State) Applications(ctx context.Context, model string) ([]Application, error) {
	var out []Application
	err := st.view(ctx, func(r reader) error {
		docs, err := list[applicationDoc](r, KindApplication, model)
		for _, d := range docs {
			out = append(out, d.Application)
		}
		return err
	})
	return out, err
}

// SetApplicationConstraints replaces an application's constraints.
func (st *State) SetApplicationConstraints(ctx context.Context, model, app string, cons Constraints) error {
	return st.update(ctx, func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		a.Constraints = cons
		return tx.put(KindApplication, model, app, &a, FieldConstraints)
	})
}
