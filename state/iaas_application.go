package state

import (
	"bytes"
	"encoding/json"
	"fmt"
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
func (st *State) AddIAASApplication(model string, p IAASApplicationParams) (Application, error) {
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
	err = st.update(func(tx *txn) error {
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

// Local charms: a deploy that gives metadata without a charm URL stores
// its charm as "local:NAME-REV".
const (
	LocalCharmPrefix = "local:"
	// MaxLocalCharmRevisions bounds the local charm revisions of one
	// charm name in a model.
	MaxLocalCharmRevisions = 1000
)

// deployCharm stores the charm of a deploy in model m, unless a charm is
// stored under its URL already (a URL names one charm), and returns it
// with its URL. A charm without a URL is a local charm: its URL is
// "local:NAME-REV" with the lowest revision that holds the same metadata or
// is free. The choice is read and written in the deploy's transaction, so
// two deploys of different metadata under one name, through any daemons,
// never share a URL (the transaction of the later one re-runs and sees the
// revision taken).
func (tx *txn) deployCharm(m modelDoc, ch Charm) (Charm, error) {
	if ch.URL == "" {
		want, err := json.Marshal(ch.Meta)
		if err != nil {
			return Charm{}, errors.Trace(err)
		}
		for rev := range MaxLocalCharmRevisions {
			url := fmt.Sprintf("%s%s-%d", LocalCharmPrefix, ch.Meta.Name, rev)
			var d charmDoc
			ok, err := get(tx, KindCharm, m.UUID, url, &d)
			if err != nil {
				return Charm{}, err
			}
			if !ok {
				ch.URL, ch.Revision = url, rev
				break
			}
			if got, err := json.Marshal(d.Meta); err == nil && bytes.Equal(got, want) {
				return d.Charm, nil
			}
		}
		if ch.URL == "" {
			return Charm{}, errors.NewQuotaLimitExceeded(nil,
				fmt.Sprintf("charm %q has %d revisions in model %q", ch.Meta.Name, MaxLocalCharmRevisions, m.Name))
		}
	}
	if ok, err := exists(tx, KindCharm, m.UUID, ch.URL); err != nil || ok {
		return ch, err
	}
	return ch, tx.put(KindCharm, m.UUID, ch.URL, &charmDoc{Model: m.UUID, Charm: ch}, watcher.FieldCreated)
}
