package state

import (
	"encoding/json"
	"strings"

	"github.com/juju/errors"
)

// kindUnitProviderID indexes units by the provider id of their cloud
// container. It holds two keys per unit with a provider id: the entry
// "<model>\x00<provider id>\x00<unit name>" (value "1") that lookups scan
// by prefix, and the unit's own "<model>\x01<unit name>" whose value is
// that provider id, so a write finds the entry to move without decoding
// the unit's stored record. UpdateApplicationsUnits names the units of the
// reported pods by provider id across the whole model (as Juju's
// Model.Containers does); without the index that was a scan of every unit
// of the model per call, which made the write O(units in the model): 45% of
// the daemon's CPU with 256 CAAS writers. The index is derived data:
// tx.put and tx.remove keep it in the transaction that writes the unit;
// schema version 2's migration built it once for stores an older build
// wrote (rebuildUnitIndex).
const kindUnitProviderID = "unit-provider-id"

func unitIndexPrefix(model, providerID string) string {
	return kindUnitProviderID + "/" + model + "\x00" + providerID + "\x00"
}

func unitIndexOwnKey(model, name string) string {
	return kindUnitProviderID + "/" + model + "\x01" + name
}

// unitProviderIDOf reads the provider id of a stored unit record without
// decoding the rest of it into a Unit.
func unitProviderIDOf(raw []byte) (string, error) {
	var d struct {
		Container *struct {
			ProviderID string `json:"provider-id"`
		} `json:"container"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return "", err
	}
	if d.Container == nil {
		return "", nil
	}
	return d.Container.ProviderID, nil
}

// indexUnit makes providerID ("" for none, or a removed unit) unit name's
// provider id in the index.
func (tx *txn) indexUnit(model, name, providerID string) error {
	own := unitIndexOwnKey(model, name)
	old, _, err := tx.Get(own)
	if err != nil {
		return errors.Trace(err)
	}
	if string(old) == providerID {
		return nil
	}
	if len(old) > 0 {
		if err := tx.Delete(unitIndexPrefix(model, string(old)) + name); err != nil {
			return errors.Trace(err)
		}
	}
	if providerID == "" {
		return errors.Trace(tx.Delete(own))
	}
	if err := tx.Put(unitIndexPrefix(model, providerID)+name, []byte("1")); err != nil {
		return errors.Trace(err)
	}
	return errors.Trace(tx.Put(own, []byte(providerID)))
}

// unitsByProviderID returns the names of model's units whose container has
// provider id id, in name order.
func unitsByProviderID(r reader, model, id string) ([]string, error) {
	prefix := unitIndexPrefix(model, id)
	var names []string
	err := scan(r, prefix, func(key string, _ []byte) error {
		name := key[len(prefix):]
		// A provider id holding "\x00" makes a longer prefix of this one;
		// unit names never hold "\x00", so its keys are told apart here.
		if !strings.Contains(name, "\x00") {
			names = append(names, name)
		}
		return nil
	})
	return names, errors.Trace(err)
}

// rebuildUnitIndex makes the index from the unit records (the migration to
// schema version 2).
func rebuildUnitIndex(tx *txn) error {
	stale, err := scanKeys(tx, kindUnitProviderID+"/")
	if err != nil {
		return err
	}
	for _, k := range stale {
		if err := tx.Delete(k); err != nil {
			return errors.Trace(err)
		}
	}
	return scan(tx, string(KindUnit)+"/", func(key string, raw []byte) error {
		id, err := unitProviderIDOf(raw)
		if err != nil {
			return errors.Annotatef(err, "decoding %s %q", KindUnit, key)
		}
		if id == "" {
			return nil
		}
		model, name, ok := strings.Cut(strings.TrimPrefix(key, string(KindUnit)+"/"), "/")
		if !ok {
			return errors.Errorf("unit key %q has no model", key)
		}
		if err := tx.Put(unitIndexPrefix(model, id)+name, []byte("1")); err != nil {
			return errors.Trace(err)
		}
		return errors.Trace(tx.Put(unitIndexOwnKey(model, name), []byte(id)))
	})
}
