package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/provisiond/provisiond/state/store"
)

// What provisiond backup, check and restore and the crash harness use of a
// bbolt file, besides store.Store: a read-only open, its figures
// (store.Inspector), a consistent copy and a consistency check.

// OpenReadOnly opens an existing data file for inspection (provisiond check,
// the crash harness): it takes bbolt's shared lock, so it fails with
// ErrLocked while a daemon holds the file, and it creates, stamps and
// migrates nothing (an older layout reads as it is). Every write fails
// with ErrReadOnly; Close must still be called.
func OpenReadOnly(path string, opts Options) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	bo := BoltOptions(opts.LockTimeout, opts.InitialMmapSize)
	bo.ReadOnly = true
	bo.PreLoadFreelist = opts.PreloadFreelist
	bdb, err := bolt.Open(path, 0o600, bo)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: %w (no shared file lock after %s; is a provisiond running on this data dir?)",
			path, ErrLocked, bo.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	var rev uint64
	var size int64
	err = bdb.View(func(tx *bolt.Tx) error {
		size = tx.Size()
		meta := tx.Bucket(metaBucket)
		if meta == nil {
			return errors.New("no meta bucket: not a provisiond data file")
		}
		if _, err := checkVersion(meta, SchemaVersion); err != nil {
			return err
		}
		var ok bool
		if rev, ok = decodeU64(meta.Get(keyRevision)); !ok {
			return fmt.Errorf("meta bucket has no valid %s", keyRevision)
		}
		return nil
	})
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return start(bdb, path, opts, rev, true, fi, size), nil
}

var _ store.Inspector = (*Store)(nil)

// Inspect reports the file's figures (store.Inspector) from one read
// transaction and bbolt's statistics: its layout version, revision, the
// revision up to which change sets are pruned, its size and the part of
// it not on bbolt's free list (unknown for a store opened read-only,
// which loads no free list).
func (s *Store) Inspect(ctx context.Context) (store.Inspection, error) {
	if err := ctx.Err(); err != nil {
		return store.Inspection{}, err
	}
	in := store.Inspection{Info: s.Info()}
	err := s.viewBolt(func(tx *bolt.Tx) error {
		meta := tx.Bucket(metaBucket)
		in.SchemaVersion, _ = decodeU64(meta.Get(keySchemaVersion))
		in.Revision, _ = decodeU64(meta.Get(keyRevision))
		in.SizeBytes = tx.Size()
		if tx.Bucket(recentBucket) != nil { // a version 1 file opened read-only has no change sets
			if oldest := oldestChange(tx); oldest > 0 {
				in.CompactRevision = oldest - 1
			} else {
				in.CompactRevision = in.Revision // none kept
			}
		}
		return nil
	})
	if err != nil {
		return store.Inspection{}, err
	}
	if !s.readOnly {
		st := s.bolt.Stats()
		free := int64(st.FreePageN+st.PendingPageN) * int64(s.bolt.Info().PageSize)
		in.InUseBytes = max(in.SizeBytes-free, 0)
	}
	return in, nil
}

// Check runs bbolt's consistency check over the whole file and returns
// every problem found, joined.
func (s *Store) Check() error {
	var errs []error
	err := s.viewBolt(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, checkProblem(err))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("boltstore: check %s: %w", s.path, errors.Join(errs...))
	}
	return nil
}

// checkProblem is one problem bbolt's check found. An assertion of
// bbolt's that failed on a damaged page is recovered by the check and
// reported as "panic: ..."; it is a finding, not a crash of ours, and an
// operator reading "panic" would take it for one: the prefix goes.
func checkProblem(err error) error {
	if rest, ok := strings.CutPrefix(err.Error(), "panic: "); ok {
		return errors.New(rest)
	}
	return err
}

// Snapshot writes a consistent copy of the whole file, as of the last
// committed revision, to w, and returns the bytes written. It runs in a
// read transaction, so writers carry on meanwhile. size is called first
// with the snapshot's exact size (for progress reporting); it may be nil.
//
// bbolt copies the pages from the file at the store's path, opened
// again: the file is checked to be the store's before and after (a file
// replaced meanwhile would give another file's pages under this one's
// meta), and a file that is not fails the store (fault.go).
func (s *Store) Snapshot(w io.Writer, size func(int64)) (int64, error) {
	var n int64
	err := s.verifyFile()
	if err == nil {
		err = s.viewBolt(func(tx *bolt.Tx) error {
			if size != nil {
				size(tx.Size())
			}
			var err error
			n, err = tx.WriteTo(w)
			return err
		})
	}
	if err == nil {
		err = s.verifyFile()
	}
	if err != nil {
		return n, fmt.Errorf("boltstore: snapshot %s: %w", s.path, err)
	}
	return n, nil
}
