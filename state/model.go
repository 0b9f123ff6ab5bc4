package state

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// ModelType says what a model's workloads run on.
type ModelType string

const (
	ModelTypeIAAS ModelType = "iaas" // machines
	ModelTypeCAAS ModelType = "caas" // Kubernetes
)

// Life is the life cycle stage of an entity. It only ever moves forward:
// Alive, Dying, Dead.
type Life string

const (
	Alive Life = "alive"
	Dying Life = "dying"
	Dead  Life = "dead"
)

// Names of the models made by Initialize.
const (
	ControllerModelName = "controller"
	DefaultModelName    = "default"
)

// Model is a model hosted by the controller.
type Model struct {
	UUID   string
	Name   string
	Type   ModelType
	Life   Life
	Config map[string]any
}

type modelDoc struct {
	UUID   string         `json:"uuid"`
	Name   string         `json:"name"`
	Type   ModelType      `json:"type"`
	Life   Life           `json:"life"`
	Config map[string]any `json:"config,omitempty"`
	// DestroyStorage is what DestroyModel was told to do with the
	// model's persistent storage: destroy it (true) or release it
	// (false); nil until told (model_destroy.go).
	DestroyStorage *bool `json:"destroy-storage,omitempty"`
}

func (d *modelDoc) model() Model {
	cfg := d.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	return Model{UUID: d.UUID, Name: d.Name, Type: d.Type, Life: d.Life, Config: cfg}
}

var validModelName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// ValidateModelName checks a model name: lowercase letters, digits and
// hyphens, starting with a letter, at most 63 characters.
func ValidateModelName(name string) error {
	if len(name) > 63 || !validModelName.MatchString(name) {
		return errors.NotValidf("model name %q", name)
	}
	return nil
}

func validateModelType(t ModelType) error {
	if t != ModelTypeIAAS && t != ModelTypeCAAS {
		return errors.NotValidf("model type %q", t)
	}
	return nil
}

// Model returns the model with the given UUID.
func (st *State) Model(ctx context.Context, uuid string) (Model, error) {
	var d modelDoc
	err := st.view(ctx, func(r reader) error {
		var err error
		d, err = getModel(r, uuid)
		return err
	})
	if err != nil {
		return Model{}, err
	}
	return d.model(), nil
}

// ModelHead returns the model with the given UUID without its config
// (Config nil): its identity, type and life, for a caller that reads no
// config. A model's config is some 70 values, copied for every caller of
// Model; ModelAdmin.AddMachines, the write of every added machine, needs
// none of them.
func (st *State) ModelHead(ctx context.Context, uuid string) (Model, error) {
	var h modelHead
	err := st.view(ctx, func(r reader) error {
		var err error
		h, err = getModelHead(r, uuid)
		return err
	})
	if err != nil {
		return Model{}, err
	}
	return Model{UUID: h.UUID, Name: h.Name, Type: h.Type, Life: h.Life}, nil
}

// ModelByName returns the model with the given name.
func (st *State) ModelByName(ctx context.Context, name string) (Model, error) {
	var d modelDoc
	err := st.view(ctx, func(r reader) error {
		uuids, err := modelNameIndex.lookup(r, "", name)
		if err != nil {
			return err
		}
		if len(uuids) == 0 {
			return errors.NotFoundf("model %q", name)
		}
		d, err = getModel(r, uuids[0])
		return err
	})
	if err != nil {
		return Model{}, err
	}
	return d.model(), nil
}

// Models returns every model, sorted by name.
func (st *State) Models(ctx context.Context) ([]Model, error) {
	var docs []modelDoc
	err := st.view(ctx, func(r reader) error {
		var err error
		docs, err = list[modelDoc](r, KindModel, "")
		return err
	})
	if err != nil {
		return nil, err
	}
	models := make([]Model, len(docs))
	for i := range docs {
		models[i] = docs[i].model()
	}
	slices.SortFunc(models, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	return models, nil
}

// AddModel adds an alive model with a new UUID. Its config is Juju's
// defaults for its type (ModelConfigDefaults) with cfg over them; the
// known keys of cfg are typed and checked as Juju's schema does.
func (st *State) AddModel(ctx context.Context, name string, typ ModelType, cfg map[string]any) (Model, error) {
	if err := ValidateModelName(name); err != nil {
		return Model{}, err
	}
	if err := validateModelType(typ); err != nil {
		return Model{}, err
	}
	cfg, err := newModelConfig(typ, cfg)
	if err != nil {
		return Model{}, err
	}
	d := &modelDoc{UUID: newUUID(), Name: name, Type: typ, Life: Alive, Config: cfg}
	if err := st.update(ctx, func(tx *txn) error { return tx.addModel(d) }); err != nil {
		return Model{}, err
	}
	return d.model(), nil
}

// addModel stores a new model and its name index entry.
func (tx *txn) addModel(d *modelDoc) error {
	// The name index (index.go) makes the name unique: it is read and
	// written in this transaction.
	if uuids, err := modelNameIndex.lookup(tx, "", d.Name); err != nil {
		return err
	} else if len(uuids) > 0 {
		return errors.AlreadyExistsf("model %q", d.Name)
	}
	if ok, err := exists(tx, KindModel, d.UUID, d.UUID); err != nil {
		return err
	} else if ok {
		return errors.AlreadyExistsf("model with UUID %q", d.UUID)
	}
	return tx.put(KindModel, d.UUID, d.UUID, d, watcher.FieldCreated)
}

// UpdateModelConfig sets and removes keys of a model's config. The known
// keys of set are typed and checked as Juju's schema does; an unset key
// that has a default (ModelConfigDefaults) takes it back, as Juju's
// --reset does, and other unset keys are removed. A call that changes
// nothing writes nothing, so it triggers no watcher.
func (st *State) UpdateModelConfig(ctx context.Context, uuid string, set map[string]any, unset []string) error {
	set, err := coerceModelConfig(set)
	if err != nil {
		return err
	}
	set, err = normalizeConfig(set)
	if err != nil {
		return err
	}
	// Most no-op updates are caught here, without involving the writer.
	m, err := st.Model(ctx, uuid)
	if err != nil {
		return err
	}
	if _, changed := applyModelConfig(m.Type, m.Config, set, unset); !changed {
		return nil
	}
	return st.update(ctx, func(tx *txn) error {
		d, err := getModel(tx, uuid)
		if err != nil {
			return err
		}
		next, changed := applyModelConfig(d.Type, d.Config, set, unset)
		if !changed {
			return errNoChange
		}
		if err := checkModelConfigChange(d.Config, next); err != nil {
			return err
		}
		if err := checkConfigTotal(next); err != nil {
			return err
		}
		d.Config = next
		return tx.put(KindModel, uuid, uuid, &d, FieldConfig)
	})
}

// configFields is the Fields of WatchModelConfig's filter, shared by every
// such watcher (the hub only reads them; a literal in the call was 16
// bytes each agent's watcher held).
var configFields = []string{FieldConfig}

// WatchModelConfig returns a watcher that fires when the model's config
// changes. It has no initial event pending: the caller reads the config
// itself after the watcher is made (a change committed in between fires the
// watcher, so it is never missed).
func (st *State) WatchModelConfig(ctx context.Context, uuid string) (*watcher.Notify, error) {
	return st.notifyInModel(ctx, uuid, watcher.Filter{Kind: KindModel, Model: uuid, ID: uuid, Fields: configFields})
}

// notifyInModel returns a notify watcher of the changes f selects, stamped
// with a view that finds model (NotFound when it does not). It resumes
// (resumeNotify).
func (st *State) notifyInModel(ctx context.Context, model string, f watcher.Filter) (*watcher.Notify, error) {
	w := watcher.NewNotify()
	s := st.subscribeStamped(w, w.Sink(), f)
	err := st.viewStamped(ctx, s, func(r reader) error {
		_, err := getModelHead(r, model)
		return err
	})
	if err == nil {
		err = st.resumeNotify(ctx, s, w, f)
	}
	if err != nil {
		_ = w.Stop()
		return nil, err
	}
	return w, nil
}

// modelHead is a model's record without its config: what most reads and
// writes check of a model (that it exists, its life, its type). Decoding
// it still scans the config's value but builds nothing of it, which was
// almost all of the decoding's allocations (a map of interfaces): in the
// watch workload at 10,000 agents decoding whole model records was 6% of
// the daemon's CPU during the measuring window, half of it AddMachine's
// check.
type modelHead struct {
	UUID string    `json:"uuid"`
	Name string    `json:"name"`
	Type ModelType `json:"type"`
	Life Life      `json:"life"`
}

// getModelHead reads model uuid's record without its config; getModel
// reads it whole. Both report errors.NotFound if there is none.
func getModelHead(r reader, uuid string) (modelHead, error) { return getModelAs[modelHead](r, uuid) }

func getModel(r reader, uuid string) (modelDoc, error) { return getModelAs[modelDoc](r, uuid) }

// getModelAs decodes model uuid's record into a T (modelDoc or modelHead).
func getModelAs[T any](r reader, uuid string) (T, error) {
	var d T
	ok, err := get(r, KindModel, uuid, uuid, &d)
	switch {
	case err != nil:
		var zero T
		return zero, err
	case !ok:
		return d, errors.NotFoundf("model %q", uuid)
	}
	return d, nil
}

// RemoveModel starts the removal of a model: DestroyModel's first step
// (beginDestroyModel) with no decision about storage.
func (st *State) RemoveModel(ctx context.Context, uuid string) (m Model, removed bool, err error) {
	return st.beginDestroyModel(ctx, uuid, nil)
}

// modelEmpty reports whether no per-model entity of model is left.
func (tx *txn) modelEmpty(uuid string) (bool, error) {
	for _, k := range ModelKinds {
		found := false
		if _, _, err := tx.Scan(kindPrefix(k, uuid), "", 1, func(string, []byte) error {
			found = true
			return nil
		}); err != nil {
			return false, errors.Trace(err)
		}
		if found {
			return false, nil
		}
	}
	return true, nil
}

// removeModelIfDone removes model if it is dying and holds no entity.
func (tx *txn) removeModelIfDone(uuid string) error {
	var d modelDoc
	ok, err := get(tx, KindModel, uuid, uuid, &d)
	if err != nil || !ok || d.Life == Alive {
		return err
	}
	empty, err := tx.modelEmpty(uuid)
	if err != nil || !empty {
		return err
	}
	return tx.removeModel(&d)
}

// removeModel deletes a model's record, its name index entry and its
// sequences, and records the model's removal.
func (tx *txn) removeModel(d *modelDoc) error {
	// Its sequences go; its index entries went with its entities (the
	// model's own with its record, below).
	keys, err := scanKeys(tx, store.Key(kindSequence, d.UUID+"/"))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(k); err != nil {
			return errors.Trace(err)
		}
	}
	// The model's records go with it (not through tx.remove, which would
	// come back here).
	for _, kind := range ModelRecordKinds {
		prefix := kindPrefix(kind, d.UUID)
		keys, err := scanKeys(tx, prefix)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return errors.Trace(err)
			}
			tx.Record(change(kind, d.UUID, k[len(prefix):], watcher.FieldRemoved))
		}
	}
	return tx.remove(KindModel, d.UUID, d.UUID)
}

// ChangeID is the id a model's change feed (WatchModelChanges) reports for
// a change of entity id of kind: "<kind>/<id>", for example "machine/0/lxd/1"
// or "model/<uuid>". Kinds contain no "/", so the first "/" splits it.
func ChangeID(kind watcher.Kind, id string) string { return string(kind) + "/" + id }

// WatchModelChanges returns a strings watcher over every change to a model:
// its own record and every entity and record in it (ModelKinds,
// ModelRecordKinds). Each change is
// reported as ChangeID(kind, id); changes coalesce as in any strings
// watcher. The initial ids are none: it is a change feed, not a set, so
// it reports what commits after the call; resumed (watch_resume.go),
// they are the entities changed after the revision resumed from.
func (st *State) WatchModelChanges(ctx context.Context, uuid string) (*watcher.Strings, []string, error) {
	w := watcher.NewStrings()
	fs := []watcher.Filter{{Kind: KindModel, Model: uuid, ID: uuid}}
	for _, k := range slices.Concat(ModelKinds, ModelRecordKinds) {
		fs = append(fs, watcher.Filter{Kind: k, Model: uuid})
	}
	s := st.subscribeStamped(w, func(_ uint64, c watcher.Change) { w.Add(ChangeID(c.Kind, c.ID)) }, fs...)
	initial, err := st.viewResumable(ctx, s, w, fs, func(r reader) ([]string, error) {
		_, err := getModelHead(r, uuid)
		return []string{}, err
	}, func(c watcher.Change) (string, bool) { return ChangeID(c.Kind, c.ID), true })
	if err != nil {
		_ = w.Stop()
		return nil, nil, err
	}
	return w, initial, nil
}
