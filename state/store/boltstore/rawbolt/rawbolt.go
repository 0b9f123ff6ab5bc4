// Package rawbolt is bbolt used directly, with none of boltstore's
// machinery: the baseline provisiond's own writes are judged against, for
// provisionbench and the Go benchmarks of the write path. It opens its
// files with the bbolt options boltstore uses (boltstore.BoltOptions), so
// the baseline and the daemon run the same bbolt. It is never part of the
// daemon: only the benchmark tool and benchmarks import it, and it lives
// under boltstore because only boltstore may import bbolt.
package rawbolt

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store/boltstore"
)

// RawFile is a bbolt file with one bucket and none of boltstore's
// machinery (no committer, no revision, no change record), opened with the
// bbolt options boltstore.Open uses.
type RawFile struct {
	bdb *bolt.DB
}

var rawBucket = []byte("bench")

// OpenRaw creates (or opens) a raw bbolt file at path, with the options a
// state file is opened with.
func OpenRaw(path string) (*RawFile, error) {
	bdb, err := bolt.Open(path, 0o600, boltstore.BoltOptions(0, boltstore.MmapSize))
	if err != nil {
		return nil, fmt.Errorf("rawbolt: open %s: %w", path, err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(rawBucket)
		return err
	}); err != nil {
		_ = bdb.Close()
		return nil, err
	}
	return &RawFile{bdb: bdb}, nil
}

// Put stores val under key in its own transaction, on the calling
// goroutine, and returns once it is on disk: bbolt's serial commit.
func (r *RawFile) Put(key, val []byte) error {
	return r.bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket(rawBucket).Put(key, val) })
}

// BatchPut is Put through bbolt's Batch (its default MaxBatchDelay and
// MaxBatchSize): concurrent callers share commits.
func (r *RawFile) BatchPut(key, val []byte) error {
	return r.bdb.Batch(func(tx *bolt.Tx) error { return tx.Bucket(rawBucket).Put(key, val) })
}

// Close closes the file.
func (r *RawFile) Close() error { return r.bdb.Close() }

// RawCommitResult is what RawCommitBench measured.
type RawCommitResult struct {
	Commits int           // transactions committed (each one put)
	Elapsed time.Duration // wall time of the run
	// Latencies are the durations of each writer's calls, in completion
	// order (one per commit).
	Latencies []time.Duration
}

// PerSecond is the commit rate.
func (r RawCommitResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Commits) / r.Elapsed.Seconds()
}

// RawCommitBench is provisionbench's write baseline. It creates a new
// RawFile at path (removed by the caller) and runs writers goroutines for
// d, each committing one put of a valueSize-byte value per call: with batch
// false through Put (every call its own transaction and fsync: the serial
// commit rate), with batch true through BatchPut.
func RawCommitBench(path string, writers int, batch bool, valueSize int, d time.Duration) (RawCommitResult, error) {
	if writers < 1 {
		return RawCommitResult{}, errors.New("rawbolt: RawCommitBench needs at least one writer")
	}
	raw, err := OpenRaw(path)
	if err != nil {
		return RawCommitResult{}, err
	}
	defer raw.Close()
	val := make([]byte, valueSize)
	commit := raw.Put
	if batch {
		commit = raw.BatchPut
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		lats     []time.Duration
		firstErr atomic.Pointer[error]
		stop     atomic.Bool
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := make([]time.Duration, 0, 1024)
			for i := 0; !stop.Load() && time.Now().Before(deadline); i++ {
				key := fmt.Appendf(nil, "w%04d/%06d", w, i%100000)
				t0 := time.Now()
				if err := commit(key, val); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					stop.Store(true)
					break
				}
				own = append(own, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, own...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res := RawCommitResult{Commits: len(lats), Elapsed: time.Since(start), Latencies: lats}
	if p := firstErr.Load(); p != nil {
		return res, *p
	}
	return res, nil
}
