package boltstore

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
	return openBenchAt(b, filepath.Join(b.TempDir(), "state.db"))
}

// openBenchAt is openBench of the file at path.
func openBenchAt(b *testing.B, path string) *Store {
	s, err := Open(path, Options{InitialMmapSize: MmapSize})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// benchStatusValue is a machine-like JSON record of about benchValueSize
// bytes whose "instance-status" member a write changes: a write keeps a
// patched history record of that member, before and after, as
// Provisioner.SetInstanceStatus does (about 300 bytes with its origin).
func benchStatusValue(i int) []byte {
	return fmt.Appendf(nil, `{"id":"7","life":"alive","series":"noble","instance-id":"i-0123456789abcdef0","nonce":"machine-7:c3b1d0a9-0e3a-4bfe-8f0b-6b0f0d1a2c3d","jobs":["JobHostUnits"],"addresses":[{"value":"10.0.0.7","type":"ipv4","scope":"local-cloud"}],"constraints":"arch=amd64 mem=4G","hardware":"arch=amd64 cores=2 mem=4096M root-disk=16384M","since":"2026-12-06T14:00:00Z","info":"","padding":"%0120d","instance-status":{"status":"running","info":"started %d","since":"2026-12-06T14:00:00.123456789Z","data":{"zone":"az1"}}}`, 0, i)
}

// BenchmarkUpdateSerialLongHistory is BenchmarkUpdateSerial writing a
// JSON record's status member, over a file that already keeps 100,000
// history records (about a day of one write a second): where a put into
// meta/history reads and rewrites a large bucket's newest leaf and the
// branches above it, as in a daemon that has run for days.
func BenchmarkUpdateSerialLongHistory(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	s, err := Open(path, Options{InitialMmapSize: MmapSize})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	const old = 100_000
	bdb, err := bolt.Open(path, 0o600, BoltOptions(0, MmapSize))
	if err != nil {
		b.Fatal(err)
	}
	origin := store.Origin{Who: "user-admin", Addr: "10.0.0.7:41234", Daemon: "vm-ab18d364", Call: "Provisioner.SetInstanceStatus"}
	rec := store.AppendCommitHead(nil, time.Now(), origin)
	rec = store.AppendWrite(rec, key("k"), benchStatusValue(0), true, benchStatusValue(1), true)
	for from := uint64(1); from <= old; from += 10_000 {
		if err := bdb.Update(func(tx *bolt.Tx) error {
			h := tx.Bucket(historyBucket)
			h.FillPercent = 1
			for r := from; r < from+10_000; r++ {
				if err := h.Put(u64(r), rec); err != nil {
					return err
				}
			}
			return tx.Bucket(metaBucket).Put(keyRevision, u64(from+10_000-1))
		}); err != nil {
			b.Fatal(err)
		}
	}
	if err := bdb.Close(); err != nil {
		b.Fatal(err)
	}
	s = openBenchAt(b, path)
	if s.Revision() != old {
		b.Fatalf("revision %d, want %d", s.Revision(), old)
	}
	ctx := store.WithOrigin(bg, origin) // a call's, as the facade layer gives it
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		val := benchStatusValue(i)
		i++
		if _, err := s.Update(ctx, func(tx store.Txn) error {
			tx.Record(benchChange)
			return tx.Put(key("k"), val)
		}); err != nil {
			b.Fatal(err)
		}
	}
}
