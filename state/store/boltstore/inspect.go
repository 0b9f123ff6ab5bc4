package boltstore

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// OpenReadOnly opens an existing data file for inspection (provisiond check,
// the crash harness): it takes bbolt's shared lock, so it fails with
// ErrLocked while a daemon holds the file, and it creates, stamps and
// migrates nothing. Every Update fails (bbolt refuses a read-write
// transaction); Close must still be called.
func OpenReadOnly(path string, opts Options) (*DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	bo := boltOptions(opts)
	bo.ReadOnly = true
	bdb, err := bolt.Open(path, 0o600, bo)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: %w (no shared file lock after %s; is a provisiond running on this data dir?)",
			path, ErrLocked, bo.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	var rev uint64
	err = bdb.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte(metaBucket))
		if meta == nil {
			return errors.New("no meta bucket: not a provisiond data file")
		}
		v, ok := decodeU64(meta.Get([]byte(keySchemaVersion)))
		if !ok || v == 0 {
			return fmt.Errorf("meta bucket has no valid %s", keySchemaVersion)
		}
		if v > SchemaVersion {
			return fmt.Errorf("%w: the file has version %d, this build supports up to %d", ErrNewerSchema, v, SchemaVersion)
		}
		if rev, ok = decodeU64(meta.Get([]byte(keyRevision))); !ok {
			return fmt.Errorf("meta bucket has no valid %s", keyRevision)
		}
		return nil
	})
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return start(bdb, path, opts, rev), nil
}

// Stats describes a data file: what provisiond check prints.
type Stats struct {
	// SchemaVersion and Revision as stored in the file.
	SchemaVersion uint64
	Revision      uint64
	// Keys counts the keys of each bucket (the meta bucket excluded).
	Keys map[string]int
	// Size is the size of the file in bytes as bbolt sees it.
	Size int64
}

// Stats reads the file's schema version, revision and per-bucket key
// counts in one read transaction.
func (d *DB) Stats() (Stats, error) {
	s := Stats{Keys: map[string]int{}}
	err := d.View(func(tx *ReadTx) error {
		meta := tx.tx.Bucket([]byte(metaBucket))
		s.SchemaVersion, _ = decodeU64(meta.Get([]byte(keySchemaVersion)))
		s.Revision, _ = decodeU64(meta.Get([]byte(keyRevision)))
		s.Size = tx.tx.Size()
		return tx.tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) == metaBucket {
				return nil
			}
			s.Keys[string(name)] = b.Stats().KeyN
			return nil
		})
	})
	return s, err
}
