package state

import (
	"context"
	"encoding/json"
	"strconv"
)

// RegressModelConfig writes model uuid's config as cfg, exactly (no
// defaults, no checks), and marks the store as schema version v: what a
// build of that version left (for the migration tests). The model's record
// keeps its other fields.
func RegressModelConfig(st *State, uuid string, cfg map[string]any, v int) error {
	return st.update(context.Background(), func(tx *txn) error {
		d, err := getModel(tx, uuid)
		if err != nil {
			return err
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		d.Config = nil
		if err := json.Unmarshal(b, &d.Config); err != nil {
			return err
		}
		if err := tx.put(KindModel, uuid, uuid, &d, FieldConfig); err != nil {
			return err
		}
		return tx.Put(schemaKey, []byte(strconv.Itoa(v)))
	})
}

// StampSchema marks the store as schema version v, as a build of that
// version left it (for the migration tests).
func StampSchema(st *State, v int) error {
	return st.update(context.Background(), func(tx *txn) error { return tx.stampSchema(v) })
}

// Migrate runs the schema migration as Open does.
func Migrate(st *State) error { return st.migrate(context.Background()) }

// StoredSchemaVersion reads the store's schema version.
func StoredSchemaVersion(st *State) (v int, err error) {
	err = st.view(context.Background(), func(r reader) error {
		v, err = schemaVersion(r)
		return err
	})
	return v, err
}
