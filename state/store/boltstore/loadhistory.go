package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
)

// Carrying another store's history (store.HistoryLoader): a migration's
// target, a backup of a store on etcd.

var _ store.HistoryLoader = (*Store)(nil)

// historyKey is the key of the i-th record (from 0) of revision rev: the
// revision, 8 bytes big endian, and for the records after the first of
// one revision (carried from an etcd group commit, LoadHistory) their
// index, 2 bytes more. They sort in revision order, a revision's records
// in their order, before the next revision's.
func historyKey(rev uint64, i int) []byte {
	k := u64(rev)
	if i > 0 {
		k = binary.BigEndian.AppendUint16(k, uint16(i))
	}
	return k
}

// historyRev returns the revision of a history key.
func historyRev(k []byte) (uint64, bool) {
	if len(k) != 8 && len(k) != 10 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[:8]), true
}

// maxRecordsPerRevision is how many records one revision of a carried
// history may have (historyKey's index).
const maxRecordsPerRevision = 1 << 16

// LoadHistory implements store.HistoryLoader: the records go into
// meta/history, loadBatch per bbolt transaction, under their revisions,
// and the Load's revision is through+1 (the state it loaded is the
// source's at through): before the Load, the store's revision becomes
// through, after it through+1. It runs
// before or after Load, on a store holding no history and no commit of
// its own (its revision at most 1, the Load's), while nothing else is
// committed.
func (s *Store) LoadHistory(ctx context.Context, through uint64, next func() (uint64, []byte, error)) (n int, err error) {
	if err := s.takeExclusive("loading the history"); err != nil {
		return 0, err
	}
	defer s.release(0)
	defer s.recoverFault(&err, debug.SetPanicOnFault(true))

	fail := func(err error) (int, error) {
		return n, fmt.Errorf("boltstore: loading the history into %s: %w", s.path, err)
	}
	rev := s.rev.Load()
	if rev > 1 {
		return fail(fmt.Errorf("the store has commits of its own (revision %d)", rev))
	}
	if err := s.bolt.View(func(tx *bolt.Tx) error {
		for _, name := range historyBuckets {
			if k, _ := tx.Bucket(name).Cursor().First(); k != nil {
				return errors.New("the store holds history already")
			}
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	// Before the Load, the Load's commit is through+1; after it, the
	// Load's revision (1) becomes through+1.
	target := through + rev
	var last uint64
	idx := 0
	n, err = s.inBatches(ctx, "loading the history into", func(tx *bolt.Tx) error {
		r, rec, err := next()
		if err != nil {
			return err // io.EOF as it is
		}
		switch {
		case r == 0 || r < last:
			return fmt.Errorf("record of revision %d after revision %d", r, last)
		case r > through:
			return fmt.Errorf("record of revision %d after the revision loaded, %d", r, through)
		case r == last:
			idx++
		default:
			idx = 0
		}
		if idx >= maxRecordsPerRevision {
			return fmt.Errorf("more than %d records of revision %d", maxRecordsPerRevision, r)
		}
		if _, err := store.DecodeCommit(r, rec); err != nil {
			return fmt.Errorf("revision %d: %w", r, err)
		}
		b := tx.Bucket(historyBucket)
		b.FillPercent = 1 // appended in revision order
		if err := b.Put(historyKey(r, idx), rec); err != nil {
			return err
		}
		last = r
		return nil
	}, func(tx *bolt.Tx) error {
		if target > rev {
			return tx.Bucket(metaBucket).Put(keyRevision, u64(target))
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	if target > rev {
		s.setApplied(target)
	}
	return n, nil
}
