package boltstore

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/watcher"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

const testBucket = "things"

// recorder collects what the committer reports.
type recorder struct {
	mu      sync.Mutex
	batches [][]Committed
	fns     []int
}

func (r *recorder) onCommit(b []Committed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, slices.Clone(b))
}

func (r *recorder) observe(_ time.Duration, fns int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fns = append(r.fns, fns)
}

// revs returns every committed revision in the order OnCommit saw them.
func (r *recorder) revs() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var revs []uint64
	for _, b := range r.batches {
		for _, c := range b {
			revs = append(revs, c.Rev)
		}
	}
	return revs
}

func openTest(t testing.TB, path string, rec *recorder) *DB {
	t.Helper()
	opts := Options{Buckets: []string{testBucket}}
	if rec != nil {
		opts.OnCommit = rec.onCommit
		opts.ObserveCommit = rec.observe
	}
	d, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func put(key, val string) func(*WriteTx) error {
	return func(tx *WriteTx) error {
		if err := tx.Put(testBucket, key, []byte(val)); err != nil {
			return err
		}
		tx.Record(watcher.Change{Kind: "thing", ID: key})
		return nil
	}
}

func get(t *testing.T, d *DB, key string) (string, bool) {
	t.Helper()
	var (
		val string
		ok  bool
	)
	if err := d.View(func(tx *ReadTx) error {
		var b []byte
		b, ok = tx.Get(testBucket, key)
		val = string(b)
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return val, ok
}

// block queues an Update that holds the committer until release is called,
// so that the Updates queued meanwhile form one batch.
func block(t *testing.T, d *DB) (release func() error) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := d.Update(func(tx *WriteTx) error {
			close(entered)
			<-gate
			return tx.Put(testBucket, "gate", []byte("x"))
		})
		done <- err
	}()
	<-entered
	return func() error {
		close(gate)
		return <-done
	}
}

// waitQueued waits, bounded, until n Updates are queued behind the
// committer.
func waitQueued(t *testing.T, d *DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		got := len(d.queue)
		d.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d updates queued, want %d", got, n)
		}
		runtime.Gosched()
	}
}

func TestRevisionPerUpdatePersistsAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	d, err := Open(path, Options{Buckets: []string{testBucket}})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Revision(); got != 0 {
		t.Fatalf("new file revision = %d, want 0", got)
	}
	for i := 1; i <= 3; i++ {
		rev, changes, err := d.Update(put(fmt.Sprint("k", i), "v"))
		if err != nil {
			t.Fatal(err)
		}
		if rev != uint64(i) {
			t.Errorf("Update %d: rev = %d", i, rev)
		}
		if len(changes) != 1 || changes[0].ID != fmt.Sprint("k", i) {
			t.Errorf("Update %d: changes = %v", i, changes)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d = openTest(t, path, nil)
	if got := d.Revision(); got != 3 {
		t.Fatalf("reopened revision = %d, want 3", got)
	}
	if v, ok := get(t, d, "k2"); !ok || v != "v" {
		t.Errorf("k2 = %q, %v after reopen", v, ok)
	}
	var viewRev uint64
	_ = d.View(func(tx *ReadTx) error { viewRev = tx.Revision(); return nil })
	if viewRev != 3 {
		t.Errorf("ReadTx.Revision = %d, want 3", viewRev)
	}
	rev, _, err := d.Update(func(tx *WriteTx) error {
		if tx.Revision() != 4 {
			return fmt.Errorf("WriteTx.Revision = %d, want 4", tx.Revision())
		}
		return nil
	})
	if err != nil || rev != 4 {
		t.Fatalf("Update after reopen = %d, %v; want 4", rev, err)
	}
}

func TestFailingAndPanickingFunctionsInABatch(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), rec)

	release := block(t, d)
	const n = 10
	errBoom := errors.New("boom")
	type res struct {
		rev uint64
		err error
	}
	results := make([]res, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var fn func(*WriteTx) error
			switch i {
			case 3:
				fn = func(tx *WriteTx) error {
					_ = tx.Put(testBucket, "k3", []byte("must not persist"))
					tx.Record(watcher.Change{Kind: "thing", ID: "k3"})
					return errBoom
				}
			case 6:
				fn = func(tx *WriteTx) error {
					_ = tx.Put(testBucket, "k6", []byte("must not persist"))
					panic("kaboom")
				}
			default:
				fn = put(fmt.Sprint("k", i), "ok")
			}
			rev, _, err := d.Update(fn)
			results[i] = res{rev, err}
		})
	}
	waitQueued(t, d, n)
	if err := release(); err != nil {
		t.Fatalf("gate: %v", err)
	}
	wg.Wait()

	var revs []uint64
	for i, r := range results {
		switch i {
		case 3:
			if !errors.Is(r.err, errBoom) {
				t.Errorf("failing fn: err = %v, want boom", r.err)
			}
		case 6:
			var pe *PanicError
			if !errors.As(r.err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
				t.Errorf("panicking fn: err = %#v, want *PanicError", r.err)
			}
		default:
			if r.err != nil {
				t.Errorf("fn %d: %v", i, r.err)
			}
			revs = append(revs, r.rev)
		}
	}
	slices.Sort(revs)
	// Revision 1 is the gate; the 8 survivors are 2..9.
	if want := []uint64{2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(revs, want) {
		t.Errorf("revisions = %v, want %v", revs, want)
	}
	for _, k := range []string{"k3", "k6"} {
		if v, ok := get(t, d, k); ok {
			t.Errorf("%s = %q: a failed function's write persisted", k, v)
		}
	}
	for _, k := range []string{"k0", "k9"} {
		if _, ok := get(t, d, k); !ok {
			t.Errorf("%s missing", k)
		}
	}
	if got := rec.revs(); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("OnCommit revisions = %v", got)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.fns, []int{1, 8}) {
		t.Errorf("ObserveCommit fns = %v, want [1 8] (gate alone, then one batch)", rec.fns)
	}
	for _, b := range rec.batches {
		for _, c := range b {
			if len(c.Changes) == 1 && (c.Changes[0].ID == "k3") {
				t.Errorf("change of the failed function was published: %v", c)
			}
		}
	}
}

func TestPanicInLoneUpdate(t *testing.T) {
	t.Parallel()
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	_, _, err := d.Update(func(tx *WriteTx) error {
		var m map[string]int
		m["x"] = 1 // nil map write
		return nil
	})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *PanicError", err)
	}
	if d.Revision() != 0 {
		t.Errorf("revision = %d after a panic, want 0", d.Revision())
	}
	if rev, _, err := d.Update(put("a", "b")); err != nil || rev != 1 {
		t.Errorf("Update after panic = %d, %v", rev, err)
	}
}

// A lone writer commits on its own goroutine; writers that arrive during
// its commit queue and are committed together, after it, by the committer.
func TestWritersQueuedBehindALoneCommitAreGrouped(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), rec)
	release := block(t, d) // a lone writer, held inside its function
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, _, errs[i] = d.Update(put(fmt.Sprint("k", i), "v")) })
	}
	waitQueued(t, d, n)
	if err := release(); err != nil {
		t.Fatalf("gate: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	rec.mu.Lock()
	fns := slices.Clone(rec.fns)
	rec.mu.Unlock()
	if !slices.Equal(fns, []int{1, n}) {
		t.Errorf("commits grouped %v functions, want [1 %d]", fns, n)
	}
	if got := rec.revs(); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("OnCommit saw %v, want 1..9 in order", got)
	}
	// The committer is idle again: the next lone writer is committed at
	// once (by the committer, the last commit having grouped several), and
	// the one after it inline again.
	for i := uint64(2); i <= 3; i++ {
		if rev, _, err := d.Update(put(fmt.Sprint("later", i), "v")); err != nil || rev != n+i {
			t.Errorf("Update after the batch = %d, %v; want %d", rev, err, n+i)
		}
	}
	rec.mu.Lock()
	fns = slices.Clone(rec.fns)
	rec.mu.Unlock()
	if !slices.Equal(fns, []int{1, n, 1, 1}) {
		t.Errorf("commits grouped %v functions, want [1 %d 1 1]", fns, n)
	}
}

func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), rec)
	const n = 64
	revs := make([]uint64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { revs[i], _, errs[i] = d.Update(put(fmt.Sprint("w", i), "v")) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	sorted := slices.Sorted(slices.Values(revs))
	for i, rev := range sorted {
		if rev != uint64(i+1) {
			t.Fatalf("revisions %v are not 1..%d, distinct", sorted, n)
		}
	}
	got := rec.revs()
	if !slices.Equal(got, sorted) {
		t.Errorf("OnCommit saw %v, want 1..%d in order", got, n)
	}
	// Each writer was answered with the revision its change was published at.
	byRev := map[uint64]string{}
	rec.mu.Lock()
	for _, b := range rec.batches {
		for _, c := range b {
			byRev[c.Rev] = c.Changes[0].ID
		}
	}
	rec.mu.Unlock()
	for i, rev := range revs {
		if byRev[rev] != fmt.Sprint("w", i) {
			t.Errorf("writer %d got rev %d, published as %q", i, rev, byRev[rev])
		}
	}
	if d.Revision() != n {
		t.Errorf("Revision = %d, want %d", d.Revision(), n)
	}
	if err := d.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestCommitErrorFailsTheWholeBatch(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), rec)
	errDisk := errors.New("no space left on device")
	// Set before the first Update; the queue's mutex orders it before the
	// committer's read.
	d.commit = func(tx *bolt.Tx) error {
		_ = tx.Rollback()
		return errDisk
	}
	release := block(t, d)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, _, errs[i] = d.Update(put(fmt.Sprint("k", i), "v")) })
	}
	waitQueued(t, d, n)
	if err := release(); !errors.Is(err, errDisk) {
		t.Errorf("gate: err = %v, want the commit error", err)
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errDisk) {
			t.Errorf("writer %d: err = %v, want the commit error", i, err)
		}
	}
	if d.Revision() != 0 {
		t.Errorf("revision = %d after failed commits, want 0", d.Revision())
	}
	if got := rec.revs(); len(got) != 0 {
		t.Errorf("OnCommit saw %v after failed commits", got)
	}
	d.mu.Lock()
	d.commit = (*bolt.Tx).Commit
	d.mu.Unlock()
	if rev, _, err := d.Update(put("later", "v")); err != nil || rev != 1 {
		t.Errorf("Update after recovery = %d, %v; want 1", rev, err)
	}
	if _, ok := get(t, d, "k0"); ok {
		t.Error("write of a failed commit is visible")
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	d, err := Open(path, Options{Buckets: []string{testBucket}})
	if err != nil {
		t.Fatal(err)
	}
	release := block(t, d)
	const n = 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, _, errs[i] = d.Update(put(fmt.Sprint("k", i), "v")) })
	}
	waitQueued(t, d, n)
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	// Wait (bounded) until Close has stopped accepting.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		c := d.closed
		d.mu.Unlock()
		if c {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not mark the DB closed")
		}
		runtime.Gosched()
	}
	if _, _, err := d.Update(put("late", "v")); !errors.Is(err, ErrClosed) {
		t.Errorf("Update during Close: %v, want ErrClosed", err)
	}
	if err := release(); err != nil {
		t.Fatalf("gate: %v", err)
	}
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("queued writer %d: %v", i, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := d.View(func(*ReadTx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("View after Close: %v, want ErrClosed", err)
	}

	d = openTest(t, path, nil)
	if got := d.Revision(); got != n+1 {
		t.Errorf("revision after reopen = %d, want %d", got, n+1)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	d, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	setSchema(t, path, SchemaVersion+1)
	_, err = Open(path, Options{})
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open of a newer file: %v, want ErrNewerSchema", err)
	}
	if !strings.Contains(err.Error(), "version 2") {
		t.Errorf("error does not name the version: %v", err)
	}
}

func setSchema(t *testing.T, path string, v uint64) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(metaBucket)).Put([]byte(keySchemaVersion), u64(v))
	}); err != nil {
		t.Fatal(err)
	}
}

func TestMigrations(t *testing.T) {
	t.Parallel()
	if len(migrations) != SchemaVersion-1 {
		t.Fatalf("%d migrations for schema version %d", len(migrations), SchemaVersion)
	}
	path := filepath.Join(t.TempDir(), "state.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	// Stamp a version 1 file.
	if err := bdb.Update(func(tx *bolt.Tx) error {
		_, err := initFile(tx, nil, 1, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var ran []int
	steps := []migration{
		func(*bolt.Tx) error { ran = append(ran, 1); return nil },
		func(*bolt.Tx) error { ran = append(ran, 2); return nil },
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		_, err := initFile(tx, []string{"b"}, 3, steps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []int{1, 2}) {
		t.Errorf("migrations ran %v, want [1 2]", ran)
	}
	_ = bdb.View(func(tx *bolt.Tx) error {
		if v, _ := decodeU64(tx.Bucket([]byte(metaBucket)).Get([]byte(keySchemaVersion))); v != 3 {
			t.Errorf("schema version after migration = %d, want 3", v)
		}
		if tx.Bucket([]byte("b")) == nil {
			t.Error("bucket not created")
		}
		return nil
	})
	// A failing migration leaves the version alone (bbolt rolls back).
	errMig := errors.New("bad step")
	err = bdb.Update(func(tx *bolt.Tx) error {
		_, err := initFile(tx, nil, 4, append(steps, func(*bolt.Tx) error { return errMig }))
		return err
	})
	if !errors.Is(err, errMig) {
		t.Errorf("failing migration: %v", err)
	}
}

func TestSecondOpenTimesOut(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	openTest(t, path, nil)
	_, err := Open(path, Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "data dir is in use by another process") {
		t.Errorf("unclear error: %v", err)
	}
}

func TestReadsAreCopies(t *testing.T) {
	t.Parallel()
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	for _, k := range []string{"a/1", "a/2", "ab/1", "b/1"} {
		if _, _, err := d.Update(put(k, k)); err != nil {
			t.Fatal(err)
		}
	}
	var kept [][]byte
	var keys []string
	err := d.View(func(tx *ReadTx) error {
		v, ok := tx.Get(testBucket, "a/1")
		if !ok {
			return errors.New("a/1 missing")
		}
		kept = append(kept, v)
		return tx.ForEachPrefix(testBucket, "a/", func(k string, v []byte) error {
			keys = append(keys, k)
			kept = append(kept, v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"a/1", "a/2"}) {
		t.Errorf("ForEachPrefix keys = %v", keys)
	}
	// Grow the file so bbolt remaps; the kept values must be unaffected.
	if _, _, err := d.Update(func(tx *WriteTx) error {
		big := make([]byte, 1<<20)
		for i := range 8 {
			if err := tx.Put(testBucket, fmt.Sprint("big", i), big); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if string(kept[0]) != "a/1" || string(kept[1]) != "a/1" || string(kept[2]) != "a/2" {
		t.Errorf("values changed after the transaction: %q", kept)
	}
	kept[0][0] = 'X'
	if v, _ := get(t, d, "a/1"); v != "a/1" {
		t.Errorf("modifying a returned value changed the store: %q", v)
	}
}

func TestGetFunc(t *testing.T) {
	t.Parallel()
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	if _, _, err := d.Update(put("k", "value")); err != nil {
		t.Fatal(err)
	}
	err := d.View(func(tx *ReadTx) error {
		var got []string
		for _, c := range []struct{ bucket, key string }{{testBucket, "k"}, {testBucket, "missing"}, {"nope", "k"}} {
			ok := tx.GetFunc(c.bucket, c.key, func(v []byte) { got = append(got, string(v)) })
			if ok != (c.key == "k" && c.bucket == testBucket) {
				t.Errorf("GetFunc(%q, %q) = %v", c.bucket, c.key, ok)
			}
		}
		if !slices.Equal(got, []string{"value"}) {
			t.Errorf("GetFunc called fn with %q, want only the value", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBuckets(t *testing.T) {
	t.Parallel()
	d := openTest(t, filepath.Join(t.TempDir(), "state.db"), nil)
	for name, fn := range map[string]func(*WriteTx) error{
		"put unknown":    func(tx *WriteTx) error { return tx.Put("nope", "k", nil) },
		"delete unknown": func(tx *WriteTx) error { return tx.Delete("nope", "k") },
		"put meta":       func(tx *WriteTx) error { return tx.Put(metaBucket, keyRevision, u64(99)) },
		"empty key":      func(tx *WriteTx) error { return tx.Put(testBucket, "", []byte("v")) },
		"iterate unknown": func(tx *WriteTx) error {
			return tx.ForEachPrefix("nope", "", func(string, []byte) error { return nil })
		},
	} {
		if _, _, err := d.Update(fn); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if d.Revision() != 0 {
		t.Errorf("revision = %d, want 0", d.Revision())
	}
	if _, _, err := d.Update(func(tx *WriteTx) error {
		if err := tx.Put(testBucket, "k", nil); err != nil {
			return err
		}
		if v, ok := tx.Get(testBucket, "k"); !ok || len(v) != 0 {
			return fmt.Errorf("empty value read back as %q, %v", v, ok)
		}
		if err := tx.Delete(testBucket, "k"); err != nil {
			return err
		}
		return tx.Delete(testBucket, "never-there")
	}); err != nil {
		t.Error(err)
	}
	err := d.View(func(tx *ReadTx) error {
		if _, ok := tx.Get("nope", "k"); ok {
			t.Error("Get from an unknown bucket found something")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func BenchmarkUpdateParallel64(b *testing.B) {
	d := openTest(b, filepath.Join(b.TempDir(), "state.db"), nil)
	val := make([]byte, 256)
	// RunParallel starts parallelism*GOMAXPROCS goroutines; aim for 64.
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	var mu sync.Mutex
	next := 0
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		g := next
		next++
		mu.Unlock()
		i := 0
		for pb.Next() {
			k := fmt.Sprintf("g%d/%d", g, i%1000)
			i++
			if _, _, err := d.Update(func(tx *WriteTx) error { return tx.Put(testBucket, k, val) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestRawCommitBench(t *testing.T) {
	for _, batch := range []bool{false, true} {
		res, err := RawCommitBench(filepath.Join(t.TempDir(), "raw.db"), 4, batch, 128, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if res.Commits == 0 || len(res.Latencies) != res.Commits || res.PerSecond() <= 0 {
			t.Fatalf("batch %v: %+v", batch, res)
		}
	}
	if _, err := RawCommitBench(filepath.Join(t.TempDir(), "raw.db"), 0, false, 1, time.Millisecond); err == nil {
		t.Fatal("no writers: want an error")
	}
}

// A panic in OnCommit during a lone writer's inline commit ends the process,
// as it does on the committer goroutine, even if the writer's caller
// recovers panics: a recovered one would leave the DB busy for ever.
func TestPanicInOnCommitEndsTheProcess(t *testing.T) {
	if dir := os.Getenv("DB_TEST_ONCOMMIT_PANIC_DIR"); dir != "" {
		// The child dies without cleaning up: it uses the parent's dir.
		d, err := Open(filepath.Join(dir, "state.db"), Options{
			Buckets:  []string{testBucket},
			OnCommit: func([]Committed) { panic("boom in OnCommit") },
		})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() { _ = recover() }()
			_, _, _ = d.Update(put("k", "v"))
		}()
		t.Log("survived the panic")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanicInOnCommitEndsTheProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "DB_TEST_ONCOMMIT_PANIC_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "survived the panic") {
		t.Fatalf("the process survived: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "boom in OnCommit") {
		t.Errorf("output does not name the panic:\n%s", out)
	}
}
