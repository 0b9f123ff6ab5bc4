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

// IAASApplicationParams describe a machine (IAAS) application for
// AddIAASApplication: what an operator's deploy gives. Units come later,
// placed on machines (AddUnit).
type IAASApplicationParams struct {
	Name  string
	Charm Charm
	// Config is the application config; Trust sets "trust" to true.
	Config      map[string]any
	Trust       bool
	Constraints Constraints
	// Storage are the storage constraints by charm storage name, filled in
	// as AddCAASApplication does (count: the charm's minimum; size: the
	// charm's minimum or 1 GiB). A named pool must be a pool of the model
	// or a provider type whose provider makes the storage's kind; an empty
	// pool stays empty (the model's default applies).
	Storage map[string]storage.Constraints
}

// AddIAASApplication deploys an application in an alive IAAS model, in one
// transaction: its charm (stored once per URL; with no URL, a local charm
// whose URL the transaction picks: see deployCharm), the application with its
// constraints and storage constraints (kept in the fields the CAAS record
// also uses), and its config.
func (st *State) AddIAASApplication(ctx context.Context, model string, p IAASApplicationParams) (Application, error) {
	if !validApplicationName.MatchString(p.Name) {
		return Application{}, errors.NotValidf("application name %q", p.Name)
	}
	if p.Charm.Meta == nil {
		return Application{}, errors.NotValidf("application %q without charm metadata", p.Name)
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
	cons, err := iaasStorageConstraints(p.Charm.Meta, p.Storage)
	if err != nil {
		return Application{}, err
	}
	a := Application{Model: model, Name: p.Name, Life: Alive, CharmURL: p.Charm.URL,
		CharmRevision: p.Charm.Revision, Subordinate: p.Charm.Meta.Subordinate, LXDProfile: p.Charm.LXDProfile,
		CAASApplication: CAASApplication{Constraints: p.Constraints, StorageConstraints: cons}}
	err = st.update(ctx, func(tx *txn) error {
		m, err := getModel(tx, model)
		if err != nil {
			return err
		}
		if m.Type != ModelTypeIAAS {
			return errors.NotSupportedf("iaas deploy on %s model %q", m.Type, m.Name)
		}
		if m.Life != Alive {
			return errors.NotValidf("adding an application to %s model %q", m.Life, m.Name)
		}
		if ok, err := exists(tx, KindApplication, model, p.Name); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("application %q", p.Name)
		}
		mgr := storage.NewManager(txPoolStore{r: tx, model: model}, StorageRegistry(ModelTypeIAAS))
		for _, name := range slices.Sorted(maps.Keys(cons)) {
			if err := validateIAASPool(mgr, cons[name].Pool, p.Charm.Meta.Storage[name].Type); err != nil {
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
		return tx.put(KindApplication, model, p.Name, &applicationDoc{Application: a}, watcher.FieldCreated)
	})
	return a, err
}

// iaasStorageConstraints is caasStorageConstraints for machines: block
// and filesystem storage alike, and a count left out is at least 1.
func iaasStorageConstraints(meta *charm.Meta, given map[string]storage.Constraints) (map[string]storage.Constraints, error) {
	return charmStorageConstraints(meta, given, 1, nil)
}

// validateIAASPool checks that a named pool (or provider type) exists in
// a machine model and that its provider makes storage of the charm
// storage's kind.
func validateIAASPool(mgr *storage.Manager, pool, kind string) error {
	if pool == "" {
		return nil
	}
	cfg, p, err := mgr.Resolve(pool)
	if err != nil {
		return err
	}
	k := storage.KindFilesystem
	if kind == charm.StorageBlock {
		k = storage.KindBlock
	}
	if !p.Supports(k) {
		return errors.NotValidf("pool %q (provider %s) for %s storage", pool, cfg.Provider, k)
	}
	return nil
}
