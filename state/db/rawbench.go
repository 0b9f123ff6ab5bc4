package db

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

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

// RawCommitBench is the baseline provisiond's own writes are judged
// against: bbolt used directly, with none of this package's machinery. It
// creates a new file at path (removed by the caller), with the options Open
// uses, and runs writers goroutines for d, each committing one put of a
// valueSize-byte value per call: with batch false through bolt's Update
// (every call its own transaction and fsync: the serial commit rate), with
// batch true through bolt's Batch (its default MaxBatchDelay and
// MaxBatchSize). It lives here because only this package may import bbolt.
func RawCommitBench(path string, writers int, batch bool, valueSize int, d time.Duration) (RawCommitResult, error) {
	if writers < 1 {
		return RawCommitResult{}, errors.New("db: RawCommitBench needs at least one writer")
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         DefaultLockTimeout,
		InitialMmapSize: 256 << 20,
		FreelistType:    bolt.FreelistMapType,
	})
	if err != nil {
		return RawCommitResult{}, fmt.Errorf("db: open %s: %w", path, err)
	}
	defer bdb.Close()
	bucket := []byte("bench")
	if err := bdb.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		return RawCommitResult{}, err
	}
	val := make([]byte, valueSize)
	commit := bdb.Update
	if batch {
		commit = bdb.Batch
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
				err := commit(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, val) })
				if err != nil {
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
