package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// loadBatch is how many records one bbolt transaction of Load writes.
const loadBatch = 10_000

// Dump calls fn for every record (every key of every kind; not the store's
// own keys, nor the ephemeral keys a process holds), in key order, from one
// read transaction, and returns its revision. Writers carry on meanwhile.
func (s *Store) Dump(ctx context.Context, fn func(key string, val []byte) error) (uint64, error) {
	var rev uint64
	var fnErr error // returned as it is
	err := s.viewBolt(func(tx *bolt.Tx) error {
		rev, _ = decodeU64(tx.Bucket(metaBucket).Get(keyRevision))
		var kinds []string
		if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if !ownBucket(name) {
				kinds = append(kinds, string(name))
			}
			return nil
		}); err != nil {
			return err
		}
		held := tx.Bucket(ephemeralBucket)
		// Flat keys sort by "<kind>/": "model-name/x" before "model/x".
		slices.SortFunc(kinds, func(a, b string) int { return strings.Compare(a+"/", b+"/") })
		n := 0
		for _, kind := range kinds {
			c := tx.Bucket([]byte(kind)).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v == nil {
					continue // a nested bucket; we make none
				}
				if n++; n%1024 == 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				key := kind + "/" + string(k)
				if held.Get([]byte(key)) != nil {
					continue // ephemeral: it lives as long as its process
				}
				if fnErr = fn(key, bytes.Clone(v)); fnErr != nil {
					return fnErr
				}
			}
		}
		return nil
	})
	switch {
	case fnErr != nil:
		return 0, fnErr
	case err != nil:
		return 0, fmt.Errorf("boltstore: dump %s: %w", s.path, err)
	}
	return rev, nil
}

// Load fills an empty store with the records next returns until it
// returns io.EOF, loadBatch records per bbolt transaction, with no change
// sets. The whole load is one revision: the revision moves by one when it
// ends. It refuses a store that holds any record, and runs only while
// nothing else is being committed (it fails if a commit is in progress).
// A failed Load leaves the batches it committed: the target must be
// emptied (a new file) before trying again.
func (s *Store) Load(ctx context.Context, next func() (key string, val []byte, err error)) (n int, err error) {
	if err := s.takeExclusive("load"); err != nil {
		return 0, err
	}
	defer s.release(0)
	s.stageBytes = -1 // its commits are not commitBatch's
	defer s.recoverFault(&err, debug.SetPanicOnFault(true))

	empty := true
	if err := s.bolt.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if !ownBucket(name) && b.Stats().KeyN > 0 {
				empty = false
			}
			return nil
		})
	}); err != nil {
		return 0, fmt.Errorf("boltstore: load: %w", err)
	}
	if !empty {
		return 0, fmt.Errorf("boltstore: load into %s: the store is not empty", s.path)
	}
	rev := s.rev.Load()
	n, err = s.inBatches(ctx, "load into", func(tx *bolt.Tx) error {
		key, val, err := next()
		if err != nil {
			return err // io.EOF as it is
		}
		if err := checkWrite(key, val); err != nil {
			return err
		}
		kind, rest, _ := strings.Cut(key, "/")
		b, err := tx.CreateBucketIfNotExists([]byte(kind))
		if err != nil {
			return err
		}
		if val == nil {
			val = []byte{}
		}
		return b.Put([]byte(rest), val)
	}, func(tx *bolt.Tx) error {
		return tx.Bucket(metaBucket).Put(keyRevision, u64(rev+1))
	})
	if err != nil {
		return n, err
	}
	s.setApplied(rev + 1)
	return n, nil
}

// inBatches writes records in bbolt transactions of up to loadBatch
// records each, checking ctx before each, until put returns io.EOF (Load,
// LoadHistory): put writes one record in tx; end writes, in the
// transaction that saw io.EOF, what the last one must hold. It returns
// how many records the committed transactions hold, and ctx's error as
// it is or a transaction's (put's, end's, bbolt's) as "boltstore: <what>
// <path>: <err>". The batches committed before an error stay.
func (s *Store) inBatches(ctx context.Context, what string, put, end func(tx *bolt.Tx) error) (n int, err error) {
	for eof := false; !eof; {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k := 0
		err := s.bolt.Update(func(tx *bolt.Tx) error {
			for k = 0; k < loadBatch; k++ {
				err := put(tx)
				if errors.Is(err, io.EOF) {
					eof = true
					return end(tx)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("boltstore: %s %s: %w", what, s.path, err)
		}
		n += k
	}
	return n, nil
}

// takeExclusive makes the caller the store's only writer (what says what
// for the error when a commit is in progress or queued): it must call
// s.release(0) when done.
func (s *Store) takeExclusive(what string) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.busy || len(s.queue) > 0 {
		return fmt.Errorf("boltstore: %s: the store is being written to", what)
	}
	s.busy = true
	return nil
}
