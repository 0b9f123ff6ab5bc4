package state

// UnitsByProviderID reads the provider id index (for tests).
func UnitsByProviderID(st *State, model, id string) (names []string, err error) {
	err = st.view(func(r reader) error {
		names, err = unitsByProviderID(r, model, id)
		return err
	})
	return names, err
}

// SpoilUnitIndex empties the provider id index and adds a wrong entry, and
// marks the store as written by a build of schema version 1, as such a
// build, which does not keep the index, leaves it.
func SpoilUnitIndex(st *State, model string) error {
	return st.update(func(tx *txn) error {
		keys, err := scanKeys(tx, kindUnitProviderID+"/")
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		if err := tx.Delete(schemaKey); err != nil {
			return err
		}
		return tx.Put(unitIndexPrefix(model, "ghost")+"nobody/0", []byte("1"))
	})
}

// SchemaKey is the key of state's schema version (for tests).
var SchemaKey = schemaKey
