package state

import "github.com/provisiond/provisiond/state/store/boltstore"

// UnitsByProviderID reads the provider id index (for tests).
func UnitsByProviderID(st *State, model, id string) (names []string, err error) {
	err = st.view(func(r reader) error {
		names, err = unitsByProviderID(r, model, id)
		return err
	})
	return names, err
}

// SpoilUnitIndex empties the provider id index and adds a wrong entry, as
// an older build that does not keep the index leaves it out of date.
func SpoilUnitIndex(st *State, model string) error {
	_, _, err := st.db.Update(func(w *boltstore.WriteTx) error {
		var keys []string
		if err := w.ForEachPrefix(bucketUnitProviderID, "", func(k string, _ []byte) error {
			keys = append(keys, k)
			return nil
		}); err != nil {
			return err
		}
		for _, k := range keys {
			if err := w.Delete(bucketUnitProviderID, k); err != nil {
				return err
			}
		}
		return w.Put(bucketUnitProviderID, unitIndexPrefix(model, "ghost")+"nobody/0", []byte("1"))
	})
	return err
}
