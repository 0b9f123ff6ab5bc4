package boltstore

import (
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// The write path of one lone writer, piece by piece. Each benchmark
// rewrites one 512-byte record (about a machine document) per durable
// commit, so the figures differ only by what lies between the caller and
// bbolt's commit:
//
//	BenchmarkRawBoltUpdate   bbolt's Update on the caller's goroutine, the
//	                         options Open uses (the floor)
//	BenchmarkUpdateSerial    this package's Update (write set, revision,
//	                         change set stored and applied), one writer at
//	                         a time
//
// state's BenchmarkSetMachineStatus and internal/daemon's
// BenchmarkSetInstanceStatus add the entity layer and the RPC round trip.

const benchValueSize = 512

func BenchmarkRawBoltUpdate(b *testing.B) {
	bdb, err := bolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, BoltOptions(0, MmapSize))
	if err != nil {
		b.Fatal(err)
	}
	defer bdb.Close()
	bucket := []byte(testKind)
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

// benchChange is the change a state write records with its one put.
var benchChange = watcher.Change{Kind: "machine", Model: "deadbeef-0bad-400d-8000-4b1d0d000003", ID: "7", Fields: []string{"status"}}

func BenchmarkUpdateSerial(b *testing.B) {
	s := openBench(b)
	val := make([]byte, benchValueSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		val[0] = byte(i)
		i++
		if _, err := s.Update(bg, func(tx store.Txn) error {
			tx.Record(benchChange)
			return tx.Put(key("k"), val)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateSerialKeys is BenchmarkUpdateSerial writing 1,000
// different keys in turn (a larger tree: more pages per commit).
func BenchmarkUpdateSerialKeys(b *testing.B) {
	s := openBench(b)
	val := make([]byte, benchValueSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := key(fmt.Sprint("k", i%1000))
		i++
		if _, err := s.Update(bg, func(tx store.Txn) error {
			tx.Record(benchChange)
			return tx.Put(k, val)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// openBench opens a file as state does (its InitialMmapSize).
func openBench(b *testing.B) *Store {
	s, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{InitialMmapSize: MmapSize})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}
