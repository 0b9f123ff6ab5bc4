package state

import (
	"log/slog"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
)

// OpenReadOnly opens an existing database for inspection (provisiond check,
// the crash harness). Nothing is created or migrated and every write method
// fails; reads, Check and Stats work. While a daemon holds the file it fails
// (after boltstore.DefaultLockTimeout) with an error saying the data dir is in use.
func OpenReadOnly(path string) (*State, error) {
	if path == "" {
		return nil, errors.NotValidf("empty state path")
	}
	d, err := boltstore.OpenReadOnly(path, boltstore.Options{InitialMmapSize: initialMmapSize})
	if err != nil {
		return nil, errors.Annotate(err, "opening state")
	}
	return &State{db: d, hub: watcher.NewHub(), logger: slog.New(slog.DiscardHandler), now: time.Now,
		machines: newMachineCache()}, nil
}

// Stats is what provisiond check reports about a database.
type Stats struct {
	SchemaVersion uint64
	Revision      uint64
	// Records counts the records of each bucket: one bucket per entity
	// kind (see the Kind constants) plus the index buckets.
	Records map[string]int
	// Size is the file size in bytes.
	Size int64
}

// Stats reads the schema version, revision and record counts.
func (st *State) Stats() (Stats, error) {
	s, err := st.db.Stats()
	if err != nil {
		return Stats{}, errors.Trace(err)
	}
	return Stats{SchemaVersion: s.SchemaVersion, Revision: s.Revision, Records: s.Keys, Size: s.Size}, nil
}
