package state

import (
	"regexp"
	"slices"
	"strings"

	"github.com/juju/errors"

	"provisiond/watcher"
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
	docMeta
	UUID   string         `json:"uuid"`
	Name   string         `json:"name"`
	Type   ModelType      `json:"type"`
	Life   Life           `json:"life"`
	Config map[string]any `json:"config,omitempty"`
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
func (st *State) Model(uuid string) (Model, error) {
	var d modelDoc
	err := st.view(func(r reader) error {
		var err error
		d, err = getModel(r, uuid)
		return err
	})
	if err != nil {
		return Model{}, err
	}
	return d.model(), nil
}

// ModelByName returns the model with the given name.
func (st *State) ModelByName(name string) (Model, error) {
	var d modelDoc
	err := st.view(func(r reader) error {
		uuid, ok := r.Get(bucketModelName, name)
		if !ok {
			return errors.NotFoundf("model %q", name)
		}
		var err error
		d, err = getModel(r, string(uuid))
		return err
	})
	if err != nil {
		return Model{}, err
	}
	return d.model(), nil
}

// Models returns every model, sorted by name.
func (st *State) Models() ([]Model, error) {
	var docs []modelDoc
	err := st.view(func(r reader) error {
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

// AddModel adds an alive model with a new UUID.
func (st *State) AddModel(name string, typ ModelType, cfg map[string]any) (Model, error) {
	if err := ValidateModelName(name); err != nil {
		return Model{}, err
	}
	if err := validateModelType(typ); err != nil {
		return Model{}, err
	}
	cfg, err := normalizeConfig(cfg)
	if err != nil {
		return Model{}, err
	}
	d := &modelDoc{UUID: newUUID(), Name: name, Type: typ, Life: Alive, Config: cfg}
	if err := st.update(func(tx *txn) error { return tx.addModel(d) }); err != nil {
		return Model{}, err
	}
	return d.model(), nil
}

// addModel stores a new model and its name index entry.
func (tx *txn) addModel(d *modelDoc) error {
	if _, ok := tx.Get(bucketModelName, d.Name); ok {
		return errors.AlreadyExistsf("model %q", d.Name)
	}
	if _, ok := tx.Get(string(KindModel), d.UUID); ok {
		return errors.AlreadyExistsf("model with UUID %q", d.UUID)
	}
	// The name index is not an entity: the model's own change covers it.
	if err := tx.Put(bucketModelName, d.Name, []byte(d.UUID)); err != nil {
		return errors.Trace(err)
	}
	return tx.put(KindModel, d.UUID, d.UUID, d, watcher.FieldCreated)
}

// UpdateModelConfig sets and removes keys of a model's config. A call that
// changes nothing writes nothing, so it triggers no watcher.
func (st *State) UpdateModelConfig(uuid string, set map[string]any, unset []string) error {
	set, err := normalizeConfig(set)
	if err != nil {
		return err
	}
	// Most no-op updates are caught here, without involving the writer.
	m, err := st.Model(uuid)
	if err != nil {
		return err
	}
	if _, changed := applyConfig(m.Config, set, unset); !changed {
		return nil
	}
	return st.update(func(tx *txn) error {
		d, err := getModel(tx, uuid)
		if err != nil {
			return err
		}
		next, changed := applyConfig(d.Config, set, unset)
		if !changed {
			return errNoChange
		}
		d.Config = next
		return tx.put(KindModel, uuid, uuid, &d, FieldConfig)
	})
}

// WatchModelConfig returns a watcher that fires when the model's config
// changes. It has no initial event pending: the caller reads the config
// itself after the watcher is made (a change committed in between fires the
// watcher, so it is never missed).
func (st *State) WatchModelConfig(uuid string) (*watcher.Notify, error) {
	w := watcher.NewNotify()
	w.OnStop(st.hub.Subscribe(watcher.Filter{
		Kind:   KindModel,
		Model:  uuid,
		ID:     uuid,
		Fields: []string{FieldConfig},
	}, w.Sink()))
	if _, err := st.Model(uuid); err != nil {
		_ = w.Stop()
		return nil, err
	}
	return w, nil
}

func getModel(r reader, uuid string) (modelDoc, error) {
	var d modelDoc
	ok, err := get(r, KindModel, uuid, uuid, &d)
	if err != nil {
		return modelDoc{}, err
	}
	if !ok {
		return modelDoc{}, errors.NotFoundf("model %q", uuid)
	}
	return d, nil
}
