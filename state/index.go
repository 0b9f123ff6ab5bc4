package state

import (
	"encoding/json"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// Derived indexes are kept inside the write transactions, through one
// mechanism: an index registry per entity kind. When tx.put or tx.remove
// writes a record of a kind that has indexes, the kind's extractor reads
// the index values of the record as it was stored (the old raw value) and
// of the record written (the new raw value, nil for a removal), and for each
// index whose value differs the entity's entry is moved: the old one
// deleted, the new one put, in the same transaction as the record. So an
// index is never stale on any store and is never rebuilt on open; a store
// an older build wrote is indexed once by a schema migration (migrate.go).
//
// An entry is the key "idx-<index>/<model>\x00<value>\x00<id>" (value
// "1"; model "" for kinds not per model, such as models themselves), so
// the ids of a value are one prefix scan. Values and ids may hold "/";
// ids never hold "\x00" (unit names, machine ids, UUIDs), so when a value
// holding "\x00" makes a longer prefix of another, its entries are told
// apart by the "\x00" left in what follows the prefix.

// index is one derived index.
type index struct {
	name string // the entries' kind is "idx-" + name
}

// The indexes state keeps.
var (
	// unitProviderIndex: units by the provider id of their cloud
	// container. UpdateApplicationsUnits names the units of the reported
	// pods by provider id across the whole model (as Juju's
	// Model.Containers does); without the index that was a scan of every
	// unit of the model per call, which made the write O(units in the
	// model): 45% of the daemon's CPU with 256 CAAS writers.
	unitProviderIndex = &index{name: "unit-provider"}
	// unitMachineIndex: units by the machine they are assigned to
	// (UnitsOnMachine, and the machine life cycle's checks).
	unitMachineIndex = &index{name: "unit-machine"}
	// modelNameIndex: models by name (unique: AddModel refuses a name in
	// use, in the transaction that adds the model).
	modelNameIndex = &index{name: "model-name"}
)

// kindIndexes are the indexes of one kind and the function that reads all
// their values from a stored record in one decode: one value per index, in
// order, "" for none. valuesOf reads them from the record being written
// (the document tx.put encodes), which saves decoding what was just
// encoded; it must agree with values (TestIndexValuesAgree).
type kindIndexes struct {
	indexes  []*index
	values   func(key string, raw []byte) ([]string, error) // key: where raw is stored, or "" (not stored yet)
	valuesOf func(d any) ([]string, bool)
}

// indexes is the registry: every index, by the kind of the records it
// derives from.
var indexes = map[watcher.Kind]kindIndexes{
	KindUnit:  {[]*index{unitProviderIndex, unitMachineIndex}, unitIndexValues, unitIndexValuesOf},
	KindModel: {[]*index{modelNameIndex}, modelIndexValues, modelIndexValuesOf},
}

func unitIndexValuesOf(d any) ([]string, bool) {
	u, ok := d.(*unitDoc)
	if !ok {
		return nil, false
	}
	return []string{u.ProviderID(), u.MachineID}, true
}

func modelIndexValuesOf(d any) ([]string, bool) {
	m, ok := d.(*modelDoc)
	if !ok {
		return nil, false
	}
	return []string{m.Name}, true
}

// unitIndexValues reads a stored unit (key not "") through the unit cache:
// a CAAS unit update has just read the record it rewrites.
func unitIndexValues(key string, raw []byte) ([]string, error) {
	if key != "" {
		u, _, err := unitRecords.getShared(key, raw)
		if err != nil {
			return nil, err
		}
		return []string{u.ProviderID(), u.MachineID}, nil
	}
	var d struct {
		MachineID string `json:"machine-id"`
		Container *struct {
			ProviderID string `json:"provider-id"`
		} `json:"container"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	var provider string
	if d.Container != nil {
		provider = d.Container.ProviderID
	}
	return []string{provider, d.MachineID}, nil
}

func modelIndexValues(_ string, raw []byte) ([]string, error) {
	var d struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	return []string{d.Name}, nil
}

// kind is the key kind of the index's entries.
func (ix *index) kind() string { return "idx-" + ix.name }

// prefix is the key prefix of the entries of value in model.
func (ix *index) prefix(model, value string) string {
	return ix.kind() + "/" + model + "\x00" + value + "\x00"
}

// entry is the key of id's entry under value in model.
func (ix *index) entry(model, value, id string) string { return ix.prefix(model, value) + id }

// lookup returns the ids with value in model, in id order.
func (ix *index) lookup(r reader, model, value string) ([]string, error) {
	prefix := ix.prefix(model, value)
	var ids []string
	err := scan(r, prefix, func(key string, _ []byte) error {
		if id := key[len(prefix):]; !strings.Contains(id, "\x00") {
			ids = append(ids, id)
		}
		return nil
	})
	return ids, errors.Trace(err)
}

// reindex moves the index entries of entity (kind, model, id), which has
// indexes ix, from the values of its stored record to those of next, the
// record about to be written (encoded from doc; nil: the entity is being
// removed). It runs before the record is written.
func (tx *txn) reindex(ix kindIndexes, kind watcher.Kind, model, id string, doc any, next []byte) error {
	var old []string
	var decErr error
	key := entityKey(kind, model, id)
	if _, err := tx.GetFunc(key, func(raw []byte) { old, decErr = ix.values(key, raw) }); err != nil {
		return errors.Trace(err)
	}
	if decErr != nil {
		return errors.Annotatef(decErr, "indexing %s %q (stored)", kind, id)
	}
	var vals []string
	if next != nil {
		var ok bool
		if vals, ok = ix.valuesOf(doc); !ok {
			var err error
			if vals, err = ix.values("", next); err != nil {
				return errors.Annotatef(err, "indexing %s %q", kind, id)
			}
		}
	}
	if kind == KindModel {
		model = "" // a model's own records carry its UUID as their model
	}
	for i, idx := range ix.indexes {
		o, n := valueAt(old, i), valueAt(vals, i)
		if o == n {
			continue
		}
		if o != "" {
			if err := tx.Delete(idx.entry(model, o, id)); err != nil {
				return errors.Trace(err)
			}
		}
		if n != "" {
			if err := tx.Put(idx.entry(model, n, id), indexMark); err != nil {
				return errors.Trace(err)
			}
		}
	}
	return nil
}

var indexMark = []byte("1")

func valueAt(vals []string, i int) string {
	if i < len(vals) {
		return vals[i]
	}
	return ""
}

// buildIndexes makes every index of the registry from the records, after
// deleting whatever entries (and the kinds of older layouts, given) are
// there: the migration of a store an older build wrote.
func buildIndexes(tx *txn, oldKinds ...string) error {
	var stale []string
	for _, ix := range indexes {
		for _, idx := range ix.indexes {
			stale = append(stale, idx.kind())
		}
	}
	for _, k := range append(stale, oldKinds...) {
		keys, err := scanKeys(tx, k+"/")
		if err != nil {
			return err
		}
		for _, key := range keys {
			if err := tx.Delete(key); err != nil {
				return errors.Trace(err)
			}
		}
	}
	for kind, ix := range indexes {
		prefix := string(kind) + "/"
		err := scan(tx, prefix, func(key string, raw []byte) error {
			model, id := "", key[len(prefix):]
			if kind != KindModel && !isControllerKind(kind) {
				var ok bool
				if model, id, ok = strings.Cut(id, "/"); !ok {
					return errors.Errorf("%s key %q has no model", kind, key)
				}
			}
			vals, err := ix.values("", raw)
			if err != nil {
				return errors.Annotatef(err, "indexing %s %q", kind, key)
			}
			for i, idx := range ix.indexes {
				if v := valueAt(vals, i); v != "" {
					if err := tx.Put(idx.entry(model, v, id), indexMark); err != nil {
						return errors.Trace(err)
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func isControllerKind(k watcher.Kind) bool {
	for _, c := range ControllerKinds {
		if c == k {
			return true
		}
	}
	return false
}
