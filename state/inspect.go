package state

import (
	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store/boltstore"
)

// OpenReadOnly opens an existing bbolt database for inspection (provisiond
// check, the crash harness). Nothing is created or migrated and every write
// method fails; reads, Check and Stats work. While a daemon holds the file
// it fails (after boltstore.DefaultLockTimeout) with an error saying the
// data dir is in use; a file of a newer schema (the store's or state's) is
// refused.
func OpenReadOnly(path string) (*State, error) {
	if path == "" {
		return nil, errors.NotValidf("empty state path")
	}
	s, err := boltstore.OpenReadOnly(path, boltstore.Options{InitialMmapSize: boltstore.MmapSize})
	if err != nil {
		return nil, errors.Annotate(err, "opening state")
	}
	st := newState(Options{})
	st.store = s
	if err := st.view(func(r reader) error {
		_, err := checkSchema(r)
		return err
	}); err != nil {
		_ = st.Close()
		return nil, errors.Annotate(err, "opening state")
	}
	return st, nil
}

// Stats is what provisiond check reports about a database.
type Stats struct {
	// SchemaVersion is the store's layout version (boltstore's), and
	// StateSchemaVersion state's (SchemaVersion; 1 for a store written
	// before state kept one).
	SchemaVersion      uint64
	StateSchemaVersion int
	Revision           uint64
	// Records counts the keys of each kind: one kind per entity kind (see
	// the Kind constants) plus those of the indexes, sequences and schema.
	Records map[string]int
	// ChangeSets counts the change sets the store keeps.
	ChangeSets int
	// Size is the file size in bytes.
	Size int64
}

// Stats reads the schema versions, revision and record counts of a bbolt
// store.
func (st *State) Stats() (Stats, error) {
	b, ok := st.store.(*boltstore.Store)
	if !ok {
		return Stats{}, errors.NotSupportedf("stats of a %s store", st.store.Info().Engine)
	}
	s, err := b.Stats()
	if err != nil {
		return Stats{}, errors.Trace(err)
	}
	var v int
	if err := st.view(func(r reader) error {
		var err error
		v, err = checkSchema(r)
		return err
	}); err != nil {
		return Stats{}, err
	}
	return Stats{SchemaVersion: s.SchemaVersion, StateSchemaVersion: v, Revision: s.Revision, Records: s.Keys,
		ChangeSets: s.ChangeSets, Size: s.Size}, nil
}
