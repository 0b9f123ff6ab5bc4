package state

import "context"

// UnitsByProviderID reads the provider id index (for tests).
func UnitsByProviderID(st *State, model, id string) (names []string, err error) {
	err = st.view(context.Background(), func(r reader) error {
		names, err = unitProviderIndex.lookup(r, model, id)
		return err
	})
	return names, err
}

// UnitsByMachineIndex reads the index of units by machine (for tests).
func UnitsByMachineIndex(st *State, model, machine string) (names []string, err error) {
	err = st.view(context.Background(), func(r reader) error {
		names, err = unitMachineIndex.lookup(r, model, machine)
		return err
	})
	return names, err
}

// ModelsByNameIndex reads the index of models by name (for tests).
func ModelsByNameIndex(st *State, name string) (uuids []string, err error) {
	err = st.view(context.Background(), func(r reader) error {
		uuids, err = modelNameIndex.lookup(r, "", name)
		return err
	})
	return uuids, err
}

// SpoilIndexes empties every index, adds wrong entries and writes them as
// schema version 2 laid them out (a unit provider id entry of the old kind,
// a model name of the old kind), and marks the store as version 2: what a
// build of that version leaves for the migration to 3 to rebuild.
func SpoilIndexes(st *State, model string) error {
	return st.update(context.Background(), func(tx *txn) error {
		for _, ix := range indexes {
			for _, idx := range ix.indexes {
				keys, err := scanKeys(tx, idx.kind()+"/")
				if err != nil {
					return err
				}
				for _, k := range keys {
					if err := tx.Delete(k); err != nil {
						return err
					}
				}
			}
		}
		for k, v := range map[string]string{
			unitMachineIndex.entry(model, "9", "nobody/0"):        "1",
			"unit-provider-id/" + model + "\x00ghost\x00nobody/0": "1",
			"unit-provider-id/" + model + "\x01nobody/0":          "ghost",
			"model-name/ghost": model,
			schemaKey:          "2",
		} {
			if err := tx.Put(k, []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
}
