package boltstore

import (
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The write path of one lone writer, piece by piece. Each benchmark
// rewrites one 512-byte record (about a machine document) per durable
// commit, so the figures differ only by what lies between the caller and
// bbolt's commit:
//
//	BenchmarkRawBoltUpdate   bbolt's Update on the caller's goroutine, the
//	                         options Open uses (the floor)
//	BenchmarkUpdateSerial    this package's Update (committer, revision,
//	                         change record), one writer at a time
//
// state's BenchmarkSetMachineStatus and internal/daemon's
// BenchmarkSetInstanceStatus add the entity layer and the RPC round trip.

const benchValueSize = 512

func BenchmarkRawBoltUpdate(b *testing.B) {
	bdb, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, boltOptions(Options{InitialMmapSize: 256 << 20}))
	if err != nil {
		b.Fatal(err)
	}
	defer bdb.Close()
	bucket := []byte(testBucket)
	if err := bdb.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucket)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	val := make([]byte, benchValueSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		val[0] = byte(i)
		i++
		if err := bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte("k"), val) }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpdateSerial(b *testing.B) {
	d := openBench(b)
	val := make([]byte, benchValueSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		val[0] = byte(i)
		i++
		if _, _, err := d.Update(func(tx *WriteTx) error { return tx.Put(testBucket, "k", val) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateSerialKeys is BenchmarkUpdateSerial writing 1,000
// different keys in turn (a larger tree: more pages per commit).
func BenchmarkUpdateSerialKeys(b *testing.B) {
	d := openBench(b)
	val := make([]byte, benchValueSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := fmt.Sprint("k", i%1000)
		i++
		if _, _, err := d.Update(func(tx *WriteTx) error { return tx.Put(testBucket, k, val) }); err != nil {
			b.Fatal(err)
		}
	}
}

// openBench opens a file as state does (its InitialMmapSize).
func openBench(b *testing.B) *DB {
	d, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{Buckets: []string{testBucket}, InitialMmapSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = d.Close() })
	return d
}
