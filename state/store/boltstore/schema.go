package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// SchemaVersion is the layout version this build writes. A file with an
// older version is migrated on Open; a newer one is refused.
//
//	1  one bucket per kind, a meta bucket with the schema version and
//	   the revision (state/db, before the store seam)
//	2  the change sets (buckets "meta/recent" and "meta/changes") and the
//	   ephemeral keys' registry ("meta/ephemeral"): buckets of their own
//	   beside meta, so meta stays small enough for bbolt to keep it inline
//	   in the root page, and no kind can be named like them (kinds hold
//	   no "/")
//	3  the history of commits ("meta/history" and "meta/histstage":
//	   revision -> history record)
//	4  a revision may have several history records (carried from an etcd
//	   group commit by a migration or an etcd backup, LoadHistory): the
//	   first under the revision, the others under the revision and their
//	   index (historyKey), which a version-3 build would misread
const SchemaVersion = 4

// The store's own buckets: meta (its keys below), and those named
// "meta/...", which no kind can be.
var (
	metaBucket       = []byte(store.MetaKind)
	keySchemaVersion = []byte("schema-version")
	keyRevision      = []byte("revision")
	keyHealthProbe   = []byte("health-probe")
	recentBucket     = []byte(store.MetaKind + "/recent")    // revision -> change set, the newest few
	changesBucket    = []byte(store.MetaKind + "/changes")   // revision -> change set, the older ones
	ephemeralBucket  = []byte(store.MetaKind + "/ephemeral") // key -> "" (held by a process)
	historyBucket    = []byte(store.MetaKind + "/history")   // revision -> history record (history.go), the older ones
	histStageBucket  = []byte(store.MetaKind + "/histstage") // revision -> history record, the newest few (history.go)
)

// historyBuckets are the buckets of the history, oldest records first.
var historyBuckets = [][]byte{historyBucket, histStageBucket}

// ownBucket reports whether a bucket is the store's own, not a kind's.
func ownBucket(name []byte) bool {
	return string(name) == store.MetaKind || bytes.HasPrefix(name, []byte(store.MetaKind+"/"))
}

// migration upgrades the file from one schema version to the next.
type migration func(tx *bolt.Tx) error

// migrations[v-1] upgrades a version v file to version v+1, so there are
// SchemaVersion-1 of them.
var migrations = []migration{
	// 1 → 2: the buckets of the change sets and ephemeral keys.
	createOwnBuckets,
	// 2 → 3: the buckets of the history.
	createHistoryBuckets,
	// 3 → 4: the history's keys may carry an index; nothing to change.
	func(*bolt.Tx) error { return nil },
}

func createHistoryBuckets(tx *bolt.Tx) error {
	for _, name := range historyBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("creating bucket %q: %w", name, err)
		}
	}
	return nil
}

func createOwnBuckets(tx *bolt.Tx) error {
	for _, name := range [][]byte{recentBucket, changesBucket, ephemeralBucket} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("creating bucket %q: %w", name, err)
		}
	}
	return nil
}

// initFile stamps a new file with version target, or checks an existing one
// and migrates it to target with steps (steps[v-1] upgrades v to v+1). It
// returns the stored revision.
func initFile(tx *bolt.Tx, target uint64, steps []migration) (uint64, error) {
	meta := tx.Bucket(metaBucket)
	if meta == nil {
		// A new file: stamp it with the current layout.
		var err error
		if meta, err = tx.CreateBucket(metaBucket); err != nil {
			return 0, err
		}
		if err := meta.Put(keySchemaVersion, u64(target)); err != nil {
			return 0, err
		}
		if err := meta.Put(keyRevision, u64(0)); err != nil {
			return 0, err
		}
		if target >= 2 {
			if err := createOwnBuckets(tx); err != nil {
				return 0, err
			}
		}
		if target >= 3 {
			if err := createHistoryBuckets(tx); err != nil {
				return 0, err
			}
		}
	}
	v, err := checkVersion(meta, target)
	if err != nil {
		return 0, err
	}
	for ; v < target; v++ {
		if int(v) > len(steps) {
			return 0, fmt.Errorf("no migration from schema version %d to %d", v, v+1)
		}
		if err := steps[v-1](tx); err != nil {
			return 0, fmt.Errorf("migrating schema from version %d to %d: %w", v, v+1, err)
		}
		if err := meta.Put(keySchemaVersion, u64(v+1)); err != nil {
			return 0, err
		}
	}
	rev, ok := decodeU64(meta.Get(keyRevision))
	if !ok {
		return 0, fmt.Errorf("meta bucket has no valid %s", keyRevision)
	}
	return rev, nil
}

// checkVersion returns the schema version stored in meta, refusing a
// missing one and one newer than target.
func checkVersion(meta *bolt.Bucket, target uint64) (uint64, error) {
	v, ok := decodeU64(meta.Get(keySchemaVersion))
	if !ok || v == 0 {
		return 0, fmt.Errorf("meta bucket has no valid %s", keySchemaVersion)
	}
	if v > target {
		return 0, fmt.Errorf("%w: the file has version %d, this build supports up to %d; use a newer provisiond",
			ErrNewerSchema, v, target)
	}
	return v, nil
}

// A change set is stored as store.AppendChanges encodes it, under its
// revision (8 bytes, big endian).

// Change sets are written to "meta/recent" first: a bucket that small is
// kept inline in the root page bbolt rewrites at every commit anyway, so
// storing a change set costs a commit no page of its own. Once recentMax
// of them, or recentMaxBytes, are there, the commit that adds one moves
// them all to "meta/changes", whose pages (its newest leaf and the branch
// above it) are then rewritten once per recentMax commits instead of at
// each: on the project's machine a commit with its change set in a bucket
// of its own wrote 4 pages instead of 2 and took 20% longer. Every
// revision in recent is newer than every one in changes.
const (
	recentMax      = 8
	recentMaxBytes = 512 // bbolt keeps a bucket inline up to a quarter page (1 KiB)
)

// putChangeSet stores the change set of revision rev, encoded at the end
// of *arena (nil: a buffer of its own): bbolt reads a value given to Put
// until the commit ends, so the arena must not be reused before.
func putChangeSet(tx *bolt.Tx, rev uint64, changes []watcher.Change, arena *[]byte) error {
	fail := func(err error) error {
		return fmt.Errorf("boltstore: storing the change set of revision %d: %w: %w", rev, store.ErrUnavailable, err)
	}
	if arena == nil {
		var own []byte
		arena = &own
	}
	start := len(*arena)
	*arena = binary.BigEndian.AppendUint64(*arena, rev)
	*arena = store.AppendChanges(*arena, changes)
	key, v := (*arena)[start:start+8:start+8], (*arena)[start+8:len(*arena):len(*arena)]
	recent := tx.Bucket(recentBucket)
	if len(v) > recentMaxBytes {
		if err := flushRecent(tx); err != nil {
			return fail(err)
		}
		if err := tx.Bucket(changesBucket).Put(key, v); err != nil {
			return fail(err)
		}
		return nil
	}
	if err := recent.Put(key, v); err != nil {
		return fail(err)
	}
	n, size := 0, 0
	c := recent.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		n++
		size += len(k) + len(v)
	}
	if n >= recentMax || size > recentMaxBytes {
		if err := flushRecent(tx); err != nil {
			return fail(err)
		}
	}
	return nil
}

// flushRecent moves every change set of meta/recent to meta/changes.
func flushRecent(tx *bolt.Tx) error {
	return moveAll(tx.Bucket(recentBucket), tx.Bucket(changesBucket))
}

// moveAll moves every key of from to to. The keys and values it reads
// stay valid for the transaction (bbolt never writes into them), so they
// are given to Put and Delete as they are: Put copies the key, and keeps
// the value only until the commit.
func moveAll(from, to *bolt.Bucket) error {
	var buf [recentMax + 1][]byte // what meta/recent holds at most: on the stack
	keys := buf[:0]
	c := from.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := to.Put(k, v); err != nil {
			return err
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		if err := from.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func encodeChanges(changes []watcher.Change) []byte {
	return store.AppendChanges(make([]byte, 0, store.ChangesSize(changes)), changes)
}

func decodeChangeSet(rev uint64, b []byte) (watcher.ChangeSet, error) {
	changes, err := store.DecodeChanges(b)
	if err != nil {
		return watcher.ChangeSet{}, fmt.Errorf("boltstore: decoding the change set of revision %d: %w", rev, err)
	}
	return watcher.ChangeSet{Rev: rev, Changes: changes}, nil
}

// oldestChange returns the oldest revision with a stored change set (0:
// none).
func oldestChange(tx *bolt.Tx) uint64 {
	k, _ := tx.Bucket(changesBucket).Cursor().First()
	if k == nil {
		k, _ = tx.Bucket(recentBucket).Cursor().First()
	}
	rev, _ := decodeU64(k)
	return rev
}

// pruneChunk is how many change sets beyond the retention wait before they
// are pruned, all in one commit: the oldest leaf pages are rewritten once
// per pruneChunk commits instead of at every commit (each page rewritten is
// one more page for that commit's fsync), and a commit never prunes more
// than maxPrune.
const (
	pruneChunk = 64
	maxPrune   = 4 * pruneChunk
)

// pruneChanges deletes the change sets of meta/changes that fall out of the
// retention at revision rev (those at or below rev-retention) once
// pruneChunk of them are due, at most maxPrune at once. oldest is the
// oldest stored (0: none); it returns the new oldest. The few in
// meta/recent are never pruned: they are the newest.
func pruneChanges(tx *bolt.Tx, oldest, rev, retention uint64) (uint64, error) {
	if oldest == 0 || rev <= retention || oldest+pruneChunk-1 > rev-retention {
		return oldest, nil // fewer than pruneChunk due
	}
	limit := rev - retention
	b := tx.Bucket(changesBucket)
	var keys [][]byte
	c := b.Cursor()
	k, _ := c.First()
	for ; k != nil && len(keys) < maxPrune; k, _ = c.Next() {
		r, _ := decodeU64(k)
		if r > limit {
			break
		}
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return 0, fmt.Errorf("boltstore: pruning change sets: %w: %w", store.ErrUnavailable, err)
		}
	}
	return oldestChange(tx), nil
}

// ChangeSets calls fn with every stored change set after revision after,
// in revision order (at most Options.Retention revisions are kept, and a
// revision whose function recorded no change has none).
func (s *Store) ChangeSets(after uint64, fn func(watcher.ChangeSet) error) error {
	return s.viewBolt(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{changesBucket, recentBucket} {
			c := tx.Bucket(name).Cursor()
			for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
				rev, _ := decodeU64(k)
				cs, err := decodeChangeSet(rev, v)
				if err != nil {
					return err
				}
				if err := fn(cs); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// viewBolt runs fn in a bbolt read transaction. A fault reading the
// memory map (a truncated file) fails the store (fault.go).
func (s *Store) viewBolt(fn func(tx *bolt.Tx) error) (err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errClosed
	}
	if err := s.usable(); err != nil {
		return err
	}
	defer s.recoverFault(&err, debug.SetPanicOnFault(true))
	err = s.bolt.View(fn)
	if errors.Is(err, errDatabaseNotOpen) {
		return errClosed
	}
	return err
}
