package boltstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

const testKind = "things"

var bg = context.Background()

// recorder collects what the store reports: the feed and ObserveCommit.
type recorder struct {
	mu   sync.Mutex
	sets []watcher.ChangeSet
	fns  []int
}

func (r *recorder) apply(cs watcher.ChangeSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sets = append(r.sets, cs)
}

func (r *recorder) observe(_ time.Duration, fns int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fns = append(r.fns, fns)
}

// revs returns every applied revision in the order Apply saw them.
func (r *recorder) revs() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var revs []uint64
	for _, cs := range r.sets {
		revs = append(revs, cs.Rev)
	}
	return revs
}

func (r *recorder) commits() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.fns)
}

func (r *recorder) options() Options {
	return Options{Feed: store.Feed{Apply: r.apply}, ObserveCommit: r.observe}
}

func openTest(t testing.TB, path string, rec *recorder) *Store {
	t.Helper()
	var opts Options
	if rec != nil {
		opts = rec.options()
	}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTest(t testing.TB, rec *recorder) *Store {
	t.Helper()
	return openTest(t, filepath.Join(t.TempDir(), "state.db"), rec)
}

func key(k string) string { return testKind + "/" + k }

// buckets counts the keys of each kind's bucket of s's file (the store's
// own left out) and the change sets it keeps.
func buckets(t testing.TB, s *Store) (keys map[string]int, changeSets int) {
	t.Helper()
	keys = map[string]int{}
	if err := s.viewBolt(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{recentBucket, changesBucket} {
			changeSets += tx.Bucket(name).Stats().KeyN
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if !ownBucket(name) {
				keys[string(name)] = b.Stats().KeyN
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return keys, changeSets
}

func put(k, val string) func(store.Txn) error {
	return func(tx store.Txn) error {
		if err := tx.Put(key(k), []byte(val)); err != nil {
			return err
		}
		tx.Record(watcher.Change{Kind: testKind, ID: k})
		return nil
	}
}

func get(t *testing.T, s *Store, k string) (string, bool) {
	t.Helper()
	var (
		val []byte
		ok  bool
	)
	if err := s.View(bg, func(r store.Reader) error {
		var err error
		val, ok, err = r.Get(key(k))
		return err
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return string(val), ok
}

// block queues an Update that holds the committer until release is called,
// so that the Updates queued meanwhile form one batch.
func block(t *testing.T, s *Store) (release func() error) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(bg, func(tx store.Txn) error {
			close(entered)
			<-gate
			return put("gate", "x")(tx)
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
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.queue)
		s.mu.Unlock()
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
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Revision(); got != 0 {
		t.Fatalf("new file revision = %d, want 0", got)
	}
	for i := 1; i <= 3; i++ {
		rev, err := s.Update(bg, put(fmt.Sprint("k", i), "v"))
		if err != nil {
			t.Fatal(err)
		}
		if rev != uint64(i) {
			t.Errorf("Update %d: rev = %d", i, rev)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, path, nil)
	if got := s.Revision(); got != 3 {
		t.Fatalf("reopened revision = %d, want 3", got)
	}
	if v, ok := get(t, s, "k2"); !ok || v != "v" {
		t.Errorf("k2 = %q, %v after reopen", v, ok)
	}
	var viewRev uint64
	_ = s.View(bg, func(r store.Reader) error { viewRev = r.Revision(); return nil })
	if viewRev != 3 {
		t.Errorf("Reader.Revision = %d, want 3", viewRev)
	}
	if info := s.Info(); info.Engine != "bbolt" || info.Location != path || info.Revision != 3 {
		t.Errorf("Info = %+v", info)
	}
	rev, err := s.Update(bg, func(tx store.Txn) error {
		if tx.Revision() != 3 {
			return fmt.Errorf("Txn.Revision = %d, want 3 (the revision it reads)", tx.Revision())
		}
		return tx.Put(key("k4"), nil)
	})
	if err != nil || rev != 4 {
		t.Fatalf("Update after reopen = %d, %v; want 4", rev, err)
	}
}

// A failed or panicking function's writes and changes are dropped and the
// rest of its batch commits without running again.
func TestFailingAndPanickingFunctionsInABatch(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := newTest(t, rec)

	release := block(t, s)
	const n = 10
	errBoom := errors.New("boom")
	type res struct {
		rev uint64
		err error
	}
	results := make([]res, n)
	calls := make([]atomic.Int32, n)
	var wg sync.WaitGroup
	for i := range n {
		var fn func(store.Txn) error
		switch i {
		case 3:
			fn = func(tx store.Txn) error {
				_ = tx.Put(key("k3"), []byte("must not persist"))
				tx.Record(watcher.Change{Kind: testKind, ID: "k3"})
				return errBoom
			}
		case 6:
			fn = func(tx store.Txn) error {
				_ = tx.Put(key("k6"), []byte("must not persist"))
				panic("kaboom")
			}
		default:
			fn = put(fmt.Sprint("k", i), "ok")
		}
		wg.Go(func() {
			rev, err := s.Update(bg, func(tx store.Txn) error {
				calls[i].Add(1)
				return fn(tx)
			})
			results[i] = res{rev, err}
		})
		waitQueued(t, s, i+1) // in order
	}
	if err := release(); err != nil {
		t.Fatalf("gate: %v", err)
	}
	wg.Wait()

	for i, r := range results {
		if c := calls[i].Load(); c != 1 {
			t.Errorf("function %d ran %d times, want once", i, c)
		}
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
		}
	}
	// Revision 1 is the gate; the 8 survivors are 2..9 in queue order.
	want := map[int]uint64{0: 2, 1: 3, 2: 4, 4: 5, 5: 6, 7: 7, 8: 8, 9: 9}
	for i, rev := range want {
		if results[i].rev != rev {
			t.Errorf("fn %d: rev %d, want %d", i, results[i].rev, rev)
		}
	}
	for _, k := range []string{"k3", "k6"} {
		if v, ok := get(t, s, k); ok {
			t.Errorf("%s = %q: a failed function's write persisted", k, v)
		}
	}
	if got := rec.revs(); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("applied revisions = %v", got)
	}
	if fns := rec.commits(); !slices.Equal(fns, []int{1, 8}) {
		t.Errorf("ObserveCommit fns = %v, want [1 8] (gate alone, then one batch)", fns)
	}
	for _, cs := range rec.sets {
		for _, c := range cs.Changes {
			if c.ID == "k3" {
				t.Errorf("change of the failed function was applied: %v", cs)
			}
		}
	}
}

// A batch of 1,024 functions whose second half fails
// ran 263,168 function calls under the rerun-the-batch design of state/db
// (each failure rolled back and reran everything before it). With a write
// set per function it runs each function once.
func TestFailingHalfOfA1024BatchRunsEachFunctionOnce(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := newTest(t, rec)
	release := block(t, s)
	const n = maxBatch
	var calls atomic.Int64
	errBoom := errors.New("boom")
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, _ = s.Update(bg, func(tx store.Txn) error {
				calls.Add(1)
				if i >= n/2 {
					return errBoom
				}
				return put(fmt.Sprint("k", i), "v")(tx)
			})
		})
		waitQueued(t, s, i+1)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := calls.Load(); got != n {
		t.Errorf("%d function calls for a batch of %d, want %d", got, n, n)
	}
	if got := s.Revision(); got != 1+n/2 {
		t.Errorf("revision %d, want %d (the gate and the first half)", got, 1+n/2)
	}
	if fns := rec.commits(); !slices.Equal(fns, []int{1, n / 2}) {
		t.Errorf("commits of %v functions, want [1 %d]", fns, n/2)
	}
}

// A function that writes nothing, or only deletes keys that are not
// there, commits nothing and spends no revision, alone or in a batch; it is
// answered with the revision it read.
func TestNoOpFunctionsSpendNoRevision(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := newTest(t, rec)
	if _, err := s.Update(bg, put("a", "1")); err != nil {
		t.Fatal(err)
	}
	noops := []func(store.Txn) error{
		func(store.Txn) error { return nil },
		func(tx store.Txn) error {
			tx.Record(watcher.Change{Kind: testKind, ID: "nothing"})
			return tx.Delete(key("never-there"))
		},
		func(tx store.Txn) error {
			if err := tx.Put(key("tmp"), []byte("x")); err != nil {
				return err
			}
			return tx.Delete(key("tmp")) // net: a delete of a missing key
		},
	}
	for i, fn := range noops {
		if rev, err := s.Update(bg, fn); err != nil || rev != 1 {
			t.Errorf("lone no-op %d: %d, %v; want 1, nil", i, rev, err)
		}
	}
	release := block(t, s) // revision 2
	var wg sync.WaitGroup
	revs := make([]uint64, len(noops)+1)
	for i, fn := range append(noops, put("b", "2")) {
		wg.Go(func() { revs[i], _ = s.Update(bg, fn) })
		waitQueued(t, s, i+1)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !slices.Equal(revs, []uint64{2, 2, 2, 3}) {
		t.Errorf("revisions in the batch = %v, want [2 2 2 3]", revs)
	}
	if got := rec.revs(); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("applied %v, want [1 2 3]", got)
	}
	if fns := rec.commits(); !slices.Equal(fns, []int{1, 1, 1}) {
		t.Errorf("commits of %v functions, want [1 1 1]", fns)
	}
}

// Functions of one batch see the writes of those before them.
func TestFunctionsSeeTheirBatch(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	release := block(t, s)
	var wg sync.WaitGroup
	seen := make([]string, 3)
	for i := range 3 {
		wg.Go(func() {
			_, err := s.Update(bg, func(tx store.Txn) error {
				v, _, err := tx.Get(key("counter"))
				if err != nil {
					return err
				}
				seen[i] = string(v)
				return tx.Put(key("counter"), append(v, 'x'))
			})
			if err != nil {
				t.Error(err)
			}
		})
		waitQueued(t, s, i+1)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !slices.Equal(seen, []string{"", "x", "xx"}) {
		t.Errorf("functions saw %q, want [\"\" x xx]", seen)
	}
	if v, _ := get(t, s, "counter"); v != "xxx" {
		t.Errorf("counter = %q", v)
	}
}

func TestPanicInLoneUpdate(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	_, err := s.Update(bg, func(tx store.Txn) error {
		_ = tx.Put(key("k"), []byte("v"))
		// A runtime error, as a bug in the function makes (not a memory
		// fault, which is the file's): index 0 of an empty slice.
		var none []int
		_ = none[tx.Revision()]
		return nil
	})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *PanicError", err)
	}
	if s.Revision() != 0 {
		t.Errorf("revision = %d after a panic, want 0", s.Revision())
	}
	if rev, err := s.Update(bg, put("a", "b")); err != nil || rev != 1 {
		t.Errorf("Update after panic = %d, %v", rev, err)
	}
}

// A lone writer commits on its own goroutine; writers that arrive during
// its commit queue and are committed together, after it, by the committer.
func TestWritersQueuedBehindALoneCommitAreGrouped(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := newTest(t, rec)
	release := block(t, s) // a lone writer, held inside its function
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.Update(bg, put(fmt.Sprint("k", i), "v")) })
	}
	waitQueued(t, s, n)
	if err := release(); err != nil {
		t.Fatalf("gate: %v", err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if fns := rec.commits(); !slices.Equal(fns, []int{1, n}) {
		t.Errorf("commits grouped %v functions, want [1 %d]", fns, n)
	}
	if got := rec.revs(); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("Apply saw %v, want 1..9 in order", got)
	}
	// The committer is idle again: the next lone writer is committed at
	// once (by the committer, the last commit having grouped several), and
	// the one after it inline again.
	for i := uint64(2); i <= 3; i++ {
		if rev, err := s.Update(bg, put(fmt.Sprint("later", i), "v")); err != nil || rev != n+i {
			t.Errorf("Update after the batch = %d, %v; want %d", rev, err, n+i)
		}
	}
	if fns := rec.commits(); !slices.Equal(fns, []int{1, n, 1, 1}) {
		t.Errorf("commits grouped %v functions, want [1 %d 1 1]", fns, n)
	}
}

// Every writer's revision is the one its change set was applied at, and
// each was applied before its Update returned.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		applied = map[uint64]string{}
	)
	var s *Store
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{Feed: store.Feed{Apply: func(cs watcher.ChangeSet) {
		mu.Lock()
		defer mu.Unlock()
		if s != nil && s.Revision() >= cs.Rev {
			t.Errorf("revision %d visible before it was applied", cs.Rev)
		}
		applied[cs.Rev] = cs.Changes[0].ID
	}}})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	t.Cleanup(func() { _ = s.Close() })
	mu.Unlock()
	const n = 64
	revs := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rev, err := s.Update(bg, put(fmt.Sprint("w", i), "v"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			if applied[rev] != fmt.Sprint("w", i) {
				t.Errorf("writer %d got rev %d, applied as %q", i, rev, applied[rev])
			}
			mu.Unlock()
			if s.Revision() < rev {
				t.Errorf("writer %d answered at rev %d before the store's revision reached it", i, rev)
			}
			revs[i] = rev
		})
	}
	wg.Wait()
	sorted := slices.Sorted(slices.Values(revs))
	for i, rev := range sorted {
		if rev != uint64(i+1) {
			t.Fatalf("revisions %v are not 1..%d, distinct", sorted, n)
		}
	}
	if s.Revision() != n {
		t.Errorf("Revision = %d, want %d", s.Revision(), n)
	}
	if err := s.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestCommitErrorFailsTheWholeBatch(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := newTest(t, rec)
	errDisk := errors.New("no space left on device")
	// Set before the first Update; the queue's mutex orders it before the
	// committer's read.
	s.commit = func(tx *bolt.Tx) error {
		_ = tx.Rollback()
		return errDisk
	}
	release := block(t, s)
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		fn := put(fmt.Sprint("k", i), "v")
		if i == 1 {
			fn = func(store.Txn) error { return nil } // a no-op: it read the batch
		}
		wg.Go(func() { _, errs[i] = s.Update(bg, fn) })
	}
	waitQueued(t, s, n)
	if err := release(); !errors.Is(err, errDisk) || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("gate: err = %v, want the commit error (unavailable)", err)
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errDisk) {
			t.Errorf("writer %d: err = %v, want the commit error", i, err)
		}
	}
	if s.Revision() != 0 {
		t.Errorf("revision = %d after failed commits, want 0", s.Revision())
	}
	if got := rec.revs(); len(got) != 0 {
		t.Errorf("Apply saw %v after failed commits", got)
	}
	if err := s.Health(bg); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Health while commits fail: %v, want unavailable", err)
	}
	s.mu.Lock()
	s.commit = (*bolt.Tx).Commit
	s.mu.Unlock()
	// Health commits a probe of its own and recovers without a write.
	if err := s.Health(bg); err != nil {
		t.Errorf("Health after the disk recovered: %v", err)
	}
	if s.Revision() != 0 {
		t.Errorf("Health's probe spent a revision: %d", s.Revision())
	}
	if rev, err := s.Update(bg, put("later", "v")); err != nil || rev != 1 {
		t.Errorf("Update after recovery = %d, %v; want 1", rev, err)
	}
	if _, ok := get(t, s, "k0"); ok {
		t.Error("write of a failed commit is visible")
	}
}

// A commit that does not end makes the store unhealthy.
func TestHealthReportsAStuckCommit(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), Options{StuckAfter: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Health(bg); err != nil {
		t.Fatalf("Health of a new store: %v", err)
	}
	gate := make(chan struct{})
	s.commit = func(tx *bolt.Tx) error {
		<-gate
		return tx.Commit()
	}
	done := make(chan error, 1)
	go func() { _, err := s.Update(bg, put("k", "v")); done <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Health(bg)
		if errors.Is(err, store.ErrUnavailable) && strings.Contains(err.Error(), "running for") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Health during a stuck commit: %v", err)
		}
		runtime.Gosched()
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.Health(bg); err != nil {
		t.Errorf("Health after the commit ended: %v", err)
	}
	_ = s.Close()
	if err := s.Health(bg); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Health after Close: %v", err)
	}
}

func TestCloseDrainsAndRefuses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	release := block(t, s)
	const n = 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.Update(bg, put(fmt.Sprint("k", i), "v")) })
	}
	waitQueued(t, s, n)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Wait (bounded) until Close has stopped accepting.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		c := s.closed
		s.mu.Unlock()
		if c {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not mark the store closed")
		}
		runtime.Gosched()
	}
	if _, err := s.Update(bg, put("late", "v")); !errors.Is(err, store.ErrClosed) {
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
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.View(bg, func(store.Reader) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close: %v, want ErrClosed", err)
	}
	if err := s.WaitApplied(bg, 100); !errors.Is(err, store.ErrClosed) {
		t.Errorf("WaitApplied after Close: %v, want ErrClosed", err)
	}

	s = openTest(t, path, nil)
	if got := s.Revision(); got != n+1 {
		t.Errorf("revision after reopen = %d, want %d", got, n+1)
	}
}

// A writer whose context ends while it is queued is answered with the
// context's error and its function never runs.
func TestContextEndsWhileQueued(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	release := block(t, s)
	ctx, cancel := context.WithCancel(bg)
	ran := false
	done := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, func(tx store.Txn) error { ran = true; return put("k", "v")(tx) })
		done <- err
	}()
	waitQueued(t, s, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled writer: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if rev, err := s.Update(bg, func(store.Txn) error { return nil }); err != nil || rev != 1 {
		t.Errorf("after the gate: %d, %v; want 1 (the cancelled function did not commit)", rev, err)
	}
	if ran {
		t.Error("the cancelled writer's function ran")
	}
	if _, err := s.Update(ctx, put("k", "v")); !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a done context: %v", err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	setSchema(t, path, SchemaVersion+1)
	_, err = Open(path, Options{})
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open of a newer file: %v, want ErrNewerSchema", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint("version ", SchemaVersion+1)) {
		t.Errorf("error does not name the version: %v", err)
	}
	if _, err := OpenReadOnly(path, Options{}); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("OpenReadOnly of a newer file: %v, want ErrNewerSchema", err)
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
		return tx.Bucket(metaBucket).Put(keySchemaVersion, u64(v))
	}); err != nil {
		t.Fatal(err)
	}
}

// A version 1 file (state/db's layout: a bucket per kind, meta with the
// version and revision) opens: its records are where state/db put them,
// its revision goes on, and it is migrated to the current layout once.
func TestVersion1FileOpensAndIsMigrated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		if err := meta.Put(keySchemaVersion, u64(1)); err != nil {
			return err
		}
		if err := meta.Put(keyRevision, u64(41)); err != nil {
			return err
		}
		for _, name := range []string{"machine", "empty"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("machine")).Put([]byte("model-1/0"), []byte(`{"id":"0","rev":41}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	s := openTest(t, path, rec)
	if s.Revision() != 41 {
		t.Errorf("revision = %d, want 41", s.Revision())
	}
	err = s.View(bg, func(r store.Reader) error {
		v, ok, err := r.Get("machine/model-1/0")
		if err != nil || !ok || string(v) != `{"id":"0","rev":41}` {
			return fmt.Errorf("machine/model-1/0 = %q, %v, %v", v, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if rev, err := s.Update(bg, func(tx store.Txn) error {
		tx.Record(watcher.Change{Kind: "machine", ID: "0"})
		return tx.Put("machine/model-1/0", []byte(`{"id":"0"}`))
	}); err != nil || rev != 42 {
		t.Errorf("Update = %d, %v; want 42", rev, err)
	}
	in, err := s.Inspect(bg)
	if err != nil {
		t.Fatal(err)
	}
	if keys, sets := buckets(t, s); in.SchemaVersion != SchemaVersion || sets != 1 || keys["machine"] != 1 {
		t.Errorf("after migration: schema %d, %d change sets, keys %v", in.SchemaVersion, sets, keys)
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
		_, err := initFile(tx, 1, nil)
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
		_, err := initFile(tx, 3, steps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, []int{1, 2}) {
		t.Errorf("migrations ran %v, want [1 2]", ran)
	}
	_ = bdb.View(func(tx *bolt.Tx) error {
		if v, _ := decodeU64(tx.Bucket(metaBucket).Get(keySchemaVersion)); v != 3 {
			t.Errorf("schema version after migration = %d, want 3", v)
		}
		return nil
	})
	// A failing migration leaves the version alone (bbolt rolls back).
	errMig := errors.New("bad step")
	err = bdb.Update(func(tx *bolt.Tx) error {
		_, err := initFile(tx, 4, append(steps, func(*bolt.Tx) error { return errMig }))
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
	s := newTest(t, nil)
	for _, k := range []string{"a/1", "a/2", "ab/1", "b/1"} {
		if _, err := s.Update(bg, put(k, k)); err != nil {
			t.Fatal(err)
		}
	}
	var kept [][]byte
	var keys []string
	err := s.View(bg, func(r store.Reader) error {
		v, ok, err := r.Get(key("a/1"))
		if err != nil || !ok {
			return fmt.Errorf("a/1: %v %v", ok, err)
		}
		kept = append(kept, v)
		_, _, err = r.Scan(key("a/"), "", 0, func(k string, v []byte) error {
			keys = append(keys, k)
			kept = append(kept, v)
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{key("a/1"), key("a/2")}) {
		t.Errorf("Scan keys = %v", keys)
	}
	// Grow the file so bbolt remaps; the kept values must be unaffected.
	if _, err := s.Update(bg, func(tx store.Txn) error {
		big := make([]byte, 1<<20)
		for i := range 8 {
			if err := tx.Put(key(fmt.Sprint("big", i)), big); err != nil {
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
	if v, _ := get(t, s, "a/1"); v != "a/1" {
		t.Errorf("modifying a returned value changed the store: %q", v)
	}
}

func TestGetFunc(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	if _, err := s.Update(bg, put("k", "value")); err != nil {
		t.Fatal(err)
	}
	err := s.View(bg, func(r store.Reader) error {
		var got []string
		for _, k := range []string{key("k"), key("missing"), "nope/k"} {
			ok, err := r.GetFunc(k, func(v []byte) { got = append(got, string(v)) })
			if err != nil || ok != (k == key("k")) {
				t.Errorf("GetFunc(%q) = %v, %v", k, ok, err)
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

// Keys map to a bucket per kind, made on demand; keys without a kind, with
// nothing after it or of the meta kind are refused, and refused writes
// spend nothing.
func TestKeys(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	for name, fn := range map[string]func(store.Txn) error{
		"put no kind":    func(tx store.Txn) error { return tx.Put("nokind", nil) },
		"put empty kind": func(tx store.Txn) error { return tx.Put("/x", nil) },
		"put empty rest": func(tx store.Txn) error { return tx.Put("kind/", nil) },
		"delete no kind": func(tx store.Txn) error { return tx.Delete("nokind") },
		"put meta":       func(tx store.Txn) error { return tx.Put("meta/revision", u64(99)) },
		"delete meta":    func(tx store.Txn) error { return tx.Delete("meta/revision") },
		"huge key":       func(tx store.Txn) error { return tx.Put("k/"+strings.Repeat("x", bolt.MaxKeySize+1), nil) },
	} {
		if _, err := s.Update(bg, fn); err == nil {
			t.Errorf("%s: no error", name)
		} else if !errors.Is(err, store.ErrBadKey) && !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("%s: %v, want ErrBadKey or ErrTooLarge", name, err)
		}
	}
	if s.Revision() != 0 {
		t.Errorf("revision = %d, want 0", s.Revision())
	}
	if _, err := s.Update(bg, func(tx store.Txn) error {
		if err := tx.Put("fresh/k", nil); err != nil {
			return err
		}
		if v, ok, err := tx.Get("fresh/k"); err != nil || !ok || len(v) != 0 {
			return fmt.Errorf("empty value read back as %q, %v, %v", v, ok, err)
		}
		if err := tx.Put("fresh/a/b/c", []byte("slashes")); err != nil {
			return err
		}
		return tx.Delete("unmade/never-there")
	}); err != nil {
		t.Fatal(err)
	}
	err := s.View(bg, func(r store.Reader) error {
		if v, ok, err := r.Get("fresh/a/b/c"); err != nil || !ok || string(v) != "slashes" {
			t.Errorf("fresh/a/b/c = %q, %v, %v", v, ok, err)
		}
		if _, ok, err := r.Get("unmade/k"); err != nil || ok {
			t.Errorf("Get from a kind never written: %v, %v", ok, err)
		}
		if _, ok, err := r.Get("meta/revision"); err != nil || ok {
			t.Errorf("Get of the store's own key: %v, %v", ok, err)
		}
		if _, ok, err := r.Get("nokind"); err != nil || ok {
			t.Errorf("Get of a key without a kind: %v, %v", ok, err)
		}
		if _, more, err := r.Scan("/", "", 0, func(string, []byte) error { t.Error("a scan of kind \"\" visited a key"); return nil }); err != nil || more {
			t.Errorf("Scan of kind \"\": %v, %v", more, err)
		}
		n := 0
		if _, more, err := r.Scan("unmade/", "", 0, func(string, []byte) error { n++; return nil }); err != nil || more || n != 0 {
			t.Errorf("Scan of a kind never written: %d keys, %v, %v", n, more, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if keys, _ := buckets(t, s); keys["fresh"] != 2 || func() bool { _, ok := keys["unmade"]; return ok }() {
		t.Errorf("buckets %v: want fresh (2 keys) made, unmade not", keys)
	}
}

// Scan pages through at most limit keys, starts after start, and merges a
// transaction's own writes and deletes over what is stored.
func TestScan(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	if _, err := s.Update(bg, func(tx store.Txn) error {
		for _, k := range []string{"m1/a", "m1/c", "m1/e", "m2/a", "m1x/a"} {
			if err := tx.Put(key(k), []byte("stored "+k)); err != nil {
				return err
			}
		}
		return tx.Put("other/m1/z", []byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	type kv struct{ k, v string }
	scanAll := func(r store.Reader, prefix, start string, limit int) ([]kv, string, bool) {
		var out []kv
		last, more, err := r.Scan(prefix, start, limit, func(k string, v []byte) error {
			out = append(out, kv{k, string(v)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out, last, more
	}
	err := s.View(bg, func(r store.Reader) error {
		got, last, more := scanAll(r, key("m1/"), "", 2)
		if len(got) != 2 || got[0].k != key("m1/a") || got[1].k != key("m1/c") || last != key("m1/c") || !more {
			t.Errorf("first page: %v %q %v", got, last, more)
		}
		got, last, more = scanAll(r, key("m1/"), last, 2)
		if len(got) != 1 || got[0].k != key("m1/e") || last != key("m1/e") || more {
			t.Errorf("second page: %v %q %v", got, last, more)
		}
		if got, _, _ := scanAll(r, key("m1/"), key("m1/e"), 0); len(got) != 0 {
			t.Errorf("after the last key: %v", got)
		}
		if got, _, _ := scanAll(r, key("m1/"), "zzz", 0); len(got) != 0 {
			t.Errorf("start after the kind: %v", got)
		}
		if got, _, _ := scanAll(r, key(""), "", 0); len(got) != 5 {
			t.Errorf("the whole kind: %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(bg, func(tx store.Txn) error {
		if err := tx.Delete(key("m1/c")); err != nil {
			return err
		}
		for _, k := range []string{"m1/b", "m1/e", "m1/f"} {
			if err := tx.Put(key(k), []byte("own "+k)); err != nil {
				return err
			}
		}
		got, _, _ := scanAll(tx, key("m1/"), "", 0)
		want := []kv{{key("m1/a"), "stored m1/a"}, {key("m1/b"), "own m1/b"}, {key("m1/e"), "own m1/e"}, {key("m1/f"), "own m1/f"}}
		if !slices.Equal(got, want) {
			t.Errorf("merged scan: %v\nwant %v", got, want)
		}
		// Paging over the merge.
		var keys []string
		for start := ""; ; {
			page, last, more := scanAll(tx, key("m1/"), start, 1)
			for _, p := range page {
				keys = append(keys, p.k)
			}
			if !more {
				break
			}
			start = last
		}
		if !slices.Equal(keys, []string{key("m1/a"), key("m1/b"), key("m1/e"), key("m1/f")}) {
			t.Errorf("paged merged scan: %v", keys)
		}
		if got, _, more := scanAll(tx, key("m1/"), key("m1/e"), 0); len(got) != 1 || got[0].k != key("m1/f") || more {
			t.Errorf("merged scan after m1/e: %v %v", got, more)
		}
		return errors.New("roll back")
	})
	if err == nil {
		t.Fatal("no error")
	}
	errStop := errors.New("stop")
	err = s.View(bg, func(r store.Reader) error {
		last, _, err := r.Scan(key("m1/"), "", 0, func(string, []byte) error { return errStop })
		if last != key("m1/a") {
			t.Errorf("last after an error = %q", last)
		}
		return err
	})
	if !errors.Is(err, errStop) {
		t.Errorf("error from fn: %v", err)
	}
}

// Nest undoes the writes and changes of a part that fails, at any depth,
// and keeps those of parts that succeed.
func TestNest(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := newTest(t, rec)
	if _, err := s.Update(bg, put("kept", "before")); err != nil {
		t.Fatal(err)
	}
	errItem := errors.New("bad item")
	var nestErrs []error
	rev, err := s.Update(bg, func(tx store.Txn) error {
		nestErrs = nestErrs[:0]
		nestErrs = append(nestErrs, tx.Nest(func() error { return put("a", "1")(tx) }))
		nestErrs = append(nestErrs, tx.Nest(func() error {
			_ = put("kept", "overwritten")(tx)
			_ = tx.Delete(key("a"))
			_ = put("b", "x")(tx)
			return errItem
		}))
		nestErrs = append(nestErrs, tx.Nest(func() error {
			_ = put("c", "1")(tx)
			inner := tx.Nest(func() error {
				_ = put("c", "inner")(tx)
				_ = put("d", "inner")(tx)
				return errItem
			})
			if !errors.Is(inner, errItem) {
				return fmt.Errorf("inner nest: %v", inner)
			}
			if v, _, _ := tx.Get(key("c")); string(v) != "1" {
				return fmt.Errorf("after the inner part failed c = %q", v)
			}
			return tx.Nest(func() error { return put("e", "1")(tx) })
		}))
		nestErrs = append(nestErrs, tx.Nest(func() error {
			if err := tx.Nest(func() error { return put("f", "1")(tx) }); err != nil {
				return err
			}
			return errItem // undoes f too
		}))
		if v, _, _ := tx.Get(key("a")); string(v) != "1" {
			return fmt.Errorf("a = %q inside the transaction", v)
		}
		return nil
	})
	if err != nil || rev != 2 {
		t.Fatalf("Update = %d, %v", rev, err)
	}
	if len(nestErrs) != 4 || nestErrs[0] != nil || !errors.Is(nestErrs[1], errItem) || nestErrs[2] != nil || !errors.Is(nestErrs[3], errItem) {
		t.Errorf("Nest errors = %v", nestErrs)
	}
	for k, want := range map[string]string{"kept": "before", "a": "1", "b": "", "c": "1", "d": "", "e": "1", "f": ""} {
		v, ok := get(t, s, k)
		if v != want || ok != (want != "") {
			t.Errorf("%s = %q, %v; want %q", k, v, ok, want)
		}
	}
	rec.mu.Lock()
	var ids []string
	for _, c := range rec.sets[1].Changes {
		ids = append(ids, c.ID)
	}
	rec.mu.Unlock()
	if !slices.Equal(ids, []string{"a", "c", "e"}) {
		t.Errorf("changes %v, want those of the parts that succeeded: [a c e]", ids)
	}
}

// A Txn kept past its function refuses to be used.
func TestTxnUsedAfterItsFunction(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	var kept store.Txn
	if _, err := s.Update(bg, func(tx store.Txn) error { kept = tx; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := kept.Put(key("k"), nil); !errors.Is(err, errTxnDone) {
		t.Errorf("Put: %v", err)
	}
	if _, _, err := kept.Get(key("k")); !errors.Is(err, errTxnDone) {
		t.Errorf("Get: %v", err)
	}
	if err := kept.Nest(func() error { return nil }); !errors.Is(err, errTxnDone) {
		t.Errorf("Nest: %v", err)
	}
}

// Every commit's change set is stored with it, in the same transaction,
// and the oldest beyond the retention are pruned pruneChunk at a time.
func TestChangeSetsStoredAndPruned(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	const retention = 10
	s, err := Open(path, Options{Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	var silent uint64
	stored := func(s *Store, after uint64) []uint64 {
		t.Helper()
		var revs []uint64
		if err := s.ChangeSets(after, func(cs watcher.ChangeSet) error {
			if cs.Rev == silent {
				if len(cs.Changes) != 0 {
					t.Errorf("change set %d = %+v, want none", cs.Rev, cs)
				}
			} else if len(cs.Changes) != 1 || cs.Changes[0].ID != fmt.Sprint("k", cs.Rev) || cs.Changes[0].Kind != testKind {
				t.Errorf("change set %d = %+v", cs.Rev, cs)
			}
			revs = append(revs, cs.Rev)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return revs
	}
	for i := 1; i <= retention+pruneChunk-1; i++ {
		if _, err := s.Update(bg, put(fmt.Sprint("k", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	if revs := stored(s, 0); len(revs) != retention+pruneChunk-1 || revs[0] != 1 {
		t.Fatalf("before a chunk is due: %d change sets from %v", len(revs), revs[:1])
	}
	// The next commit makes a chunk due: everything but the retention goes.
	rev, err := s.Update(bg, put(fmt.Sprint("k", retention+pruneChunk), "v"))
	if err != nil {
		t.Fatal(err)
	}
	revs := stored(s, 0)
	if len(revs) != retention || revs[0] != rev-retention+1 || revs[len(revs)-1] != rev {
		t.Errorf("after the prune: %v, want the last %d up to %d", revs, retention, rev)
	}
	// A function that writes without recording a change stores an empty
	// change set: every revision has one.
	if silent, err = s.Update(bg, func(tx store.Txn) error { return tx.Put(key("silent"), nil) }); err != nil {
		t.Fatal(err)
	}
	if got := stored(s, rev-1); !slices.Equal(got, []uint64{rev, silent}) {
		t.Errorf("change sets after %d: %v", rev-1, got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, nil)
	if got := stored(s, rev-3); !slices.Equal(got, []uint64{rev - 2, rev - 1, rev, silent}) {
		t.Errorf("change sets after %d on reopen: %v", rev-3, got)
	}
}

// WaitApplied returns once a revision is applied, or the context ends.
func TestWaitApplied(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	if err := s.WaitApplied(bg, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.WaitApplied(bg, 2) }()
	for i := range 2 {
		select {
		case err := <-done:
			t.Fatalf("WaitApplied(2) returned %v at revision %d", err, i)
		default:
		}
		if _, err := s.Update(bg, put(fmt.Sprint("k", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := s.WaitApplied(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitApplied with a done context: %v", err)
	}
}

// An ephemeral key is an ordinary key while held; its put and removal are
// changes of kind Kind(key), id Rest(key); release, Close, and the Open
// after a process died without closing remove it.
func TestEphemeral(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := &recorder{}
	s := openTest(t, filepath.Join(dir, "state.db"), rec)
	release, err := s.Ephemeral(bg, "daemon/a", []byte("10.0.0.1:17070"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ephemeral(bg, "meta/x", nil); !errors.Is(err, store.ErrBadKey) {
		t.Errorf("Ephemeral of a meta key: %v", err)
	}
	value := func(s *Store, k string) string {
		var v []byte
		_ = s.View(bg, func(r store.Reader) error { v, _, _ = r.Get(k); return nil })
		return string(v)
	}
	if v := value(s, "daemon/a"); v != "10.0.0.1:17070" {
		t.Errorf("held key = %q", v)
	}
	release()
	release() // idempotent
	if v := value(s, "daemon/a"); v != "" {
		t.Errorf("released key = %q", v)
	}
	rec.mu.Lock()
	sets := slices.Clone(rec.sets)
	rec.mu.Unlock()
	want := []watcher.ChangeSet{
		{Rev: 1, Changes: []watcher.Change{{Kind: "daemon", ID: "a", Fields: []string{watcher.FieldCreated}}}},
		{Rev: 2, Changes: []watcher.Change{{Kind: "daemon", ID: "a", Fields: []string{watcher.FieldRemoved}}}},
	}
	if fmt.Sprint(sets) != fmt.Sprint(want) {
		t.Errorf("applied %v\nwant %v", sets, want)
	}

	// Held while a copy of the file is taken: the copy is a file left by
	// a process that died holding the key.
	if _, err := s.Ephemeral(bg, "daemon/b", []byte("b")); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "crashed.db")
	f, err := os.Create(crashed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(f, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, filepath.Join(dir, "state.db"), nil)
	if v := value(s, "daemon/b"); v != "" || s.Revision() != 4 {
		t.Errorf("after Close: daemon/b = %q at revision %d, want gone at 4", v, s.Revision())
	}
	c := openTest(t, crashed, nil)
	if v := value(c, "daemon/b"); v != "" || c.Revision() != 4 {
		t.Errorf("after a crash: daemon/b = %q at revision %d, want gone at 4", v, c.Revision())
	}
	var last watcher.ChangeSet
	_ = c.ChangeSets(3, func(cs watcher.ChangeSet) error { last = cs; return nil })
	if last.Rev != 4 || len(last.Changes) != 1 || !last.Changes[0].Has(watcher.FieldRemoved) || last.Changes[0].ID != "b" {
		t.Errorf("the crashed holder's removal: %+v", last)
	}
	// A second Ephemeral takes the key over; the first release leaves it.
	r1, err := c.Ephemeral(bg, "daemon/c", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Ephemeral(bg, "daemon/c", []byte("2"))
	if err != nil {
		t.Fatal(err)
	}
	r1()
	if v := value(c, "daemon/c"); v != "2" {
		t.Errorf("after the first holder's release: %q", v)
	}
	r2()
	if v := value(c, "daemon/c"); v != "" {
		t.Errorf("after the second holder's release: %q", v)
	}
}

// Elect leads at once on bbolt; callers of one process take turns, and
// Close ends the lead.
func TestElect(t *testing.T) {
	t.Parallel()
	s := newTest(t, nil)
	leading, resign, err := s.Elect(bg, "cleanup")
	if err != nil {
		t.Fatal(err)
	}
	if leading.Err() != nil {
		t.Fatal("not leading")
	}
	other, resignOther, err := s.Elect(bg, "other")
	if err != nil || other.Err() != nil {
		t.Fatalf("another election: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, _, err := s.Elect(ctx, "cleanup"); !errors.Is(err, context.Canceled) {
		t.Errorf("second candidate with a done context: %v", err)
	}
	second := make(chan context.Context, 1)
	go func() {
		l, r, err := s.Elect(bg, "cleanup")
		if err != nil {
			t.Error(err)
			close(second)
			return
		}
		defer r()
		second <- l
		<-l.Done()
	}()
	select {
	case <-second:
		t.Fatal("two leaders at once")
	default:
	}
	resign()
	resign()
	if leading.Err() == nil {
		t.Error("still leading after resigning")
	}
	l2 := <-second
	if l2 == nil || l2.Err() != nil {
		t.Fatal("the second candidate does not lead")
	}
	resignOther()
	_ = s.Close()
	<-l2.Done()
	if _, _, err := s.Elect(bg, "x"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Elect after Close: %v", err)
	}
}

// Dump writes every record in key order at one revision; Load fills an
// empty store with it and refuses a store that holds records.
func TestDumpAndLoad(t *testing.T) {
	t.Parallel()
	src := newTest(t, nil)
	if _, err := src.Update(bg, func(tx store.Txn) error {
		for _, k := range []string{"model/u1", "model-name/default", "machine/u1/0", "machine/u1/0/lxd/0"} {
			if err := tx.Put(k, []byte("v "+k)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	type kv struct{ k, v string }
	var dump []kv
	rev, err := src.Dump(bg, func(k string, v []byte) error { dump = append(dump, kv{k, string(v)}); return nil })
	if err != nil || rev != 1 {
		t.Fatalf("Dump = %d, %v", rev, err)
	}
	keys := make([]string, len(dump))
	for i, d := range dump {
		keys[i] = d.k
	}
	if want := []string{"machine/u1/0", "machine/u1/0/lxd/0", "model-name/default", "model/u1"}; !slices.Equal(keys, want) {
		t.Errorf("dump order %v, want %v", keys, want)
	}
	dst := newTest(t, nil)
	i := 0
	n, err := dst.Load(bg, func() (string, []byte, error) {
		if i == len(dump) {
			return "", nil, io.EOF
		}
		i++
		return dump[i-1].k, []byte(dump[i-1].v), nil
	})
	if err != nil || n != len(dump) {
		t.Fatalf("Load = %d, %v", n, err)
	}
	if dst.Revision() != 1 {
		t.Errorf("revision after Load = %d, want 1", dst.Revision())
	}
	var again []kv
	if _, err := dst.Dump(bg, func(k string, v []byte) error { again = append(again, kv{k, string(v)}); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again, dump) {
		t.Errorf("loaded %v\nwant %v", again, dump)
	}
	if _, err := dst.Load(bg, func() (string, []byte, error) { return "", nil, io.EOF }); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Load into a store with records: %v", err)
	}
	if rev, err := dst.Update(bg, put("after", "load")); err != nil || rev != 2 {
		t.Errorf("Update after Load = %d, %v", rev, err)
	}
}

// A panic in Feed.Apply during a lone writer's inline commit ends the
// process, as it does on the committer goroutine, even if the writer's
// caller recovers panics: a recovered one would leave the store busy for
// ever.
func TestPanicInApplyEndsTheProcess(t *testing.T) {
	if dir := os.Getenv("BOLTSTORE_TEST_APPLY_PANIC_DIR"); dir != "" {
		// The child dies without cleaning up: it uses the parent's dir.
		s, err := Open(filepath.Join(dir, "state.db"), Options{
			Feed: store.Feed{Apply: func(watcher.ChangeSet) { panic("boom in Apply") }},
		})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() { _ = recover() }()
			_, _ = s.Update(bg, put("k", "v"))
		}()
		t.Log("survived the panic")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPanicInApplyEndsTheProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "BOLTSTORE_TEST_APPLY_PANIC_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "survived the panic") {
		t.Fatalf("the process survived: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "boom in Apply") {
		t.Errorf("output does not name the panic:\n%s", out)
	}
}

func BenchmarkUpdateParallel64(b *testing.B) {
	s := newTest(b, nil)
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
			k := key(fmt.Sprintf("g%d/%d", g, i%1000))
			i++
			if _, err := s.Update(bg, func(tx store.Txn) error { return tx.Put(k, val) }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A change set a file holds in the bytes written before the change-set
// codec moved to package store reads back through the store: data dirs
// written then still open and follow.
func TestChangeSetWrittenBefore(t *testing.T) {
	t.Parallel()
	const old = "01076d616368696e652464656164626565662d306261642d343030642d383030302d34623164306430303030303307302f6c78642f3101300306737461747573046c6966650464656164"
	path := filepath.Join(t.TempDir(), "state.db")
	s := openTest(t, path, nil)
	if _, err := s.Update(bg, put("a", "1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := hex.DecodeString(old)
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error { return tx.Bucket(recentBucket).Put(u64(1), b) }); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, nil)
	var got []watcher.ChangeSet
	if err := s.ChangeSets(0, func(cs watcher.ChangeSet) error { got = append(got, cs); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []watcher.Change{{Kind: "machine", Model: "deadbeef-0bad-400d-8000-4b1d0d000003", ID: "0/lxd/1", Parent: "0",
		Fields: []string{"status", "life", "dead"}}}
	if len(got) != 1 || got[0].Rev != 1 || fmt.Sprint(got[0].Changes) != fmt.Sprint(want) {
		t.Fatalf("change sets %+v, want revision 1 with %+v", got, want)
	}
}

// Change sets read back as they were recorded, and a damaged one is an
// error, not a panic.
func TestChangeSetEncoding(t *testing.T) {
	t.Parallel()
	for _, changes := range [][]watcher.Change{
		nil,
		{{Kind: "machine", Model: "m", ID: "0/lxd/1", Parent: "0", Fields: []string{"life", "dead"}}},
		{{Kind: "unit", ID: "a/0"}, {Kind: "k", Model: strings.Repeat("x", 300), ID: "\x00\xff", Fields: []string{""}}},
	} {
		b := encodeChanges(changes)
		cs, err := decodeChangeSet(7, b)
		if err != nil {
			t.Fatal(err)
		}
		if cs.Rev != 7 || fmt.Sprint(cs.Changes) != fmt.Sprint(changes) || len(cs.Changes) != len(changes) {
			t.Errorf("decoded %+v, want %+v", cs.Changes, changes)
		}
		for i := range len(b) {
			if _, err := decodeChangeSet(7, b[:i]); err == nil {
				t.Errorf("a change set cut at %d of %d bytes decoded", i, len(b))
			}
		}
	}
	if _, err := decodeChangeSet(1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}); err == nil {
		t.Error("a huge count decoded")
	}
}

// TestUpdateWaitsForItsRunningFunction: a caller whose ctx ends while its
// function runs on the committer goroutine (queued behind another
// writer) gets ctx's error only once the function has returned, as
// store.Store promises: the function writes its caller's memory.
func TestUpdateWaitsForItsRunningFunction(t *testing.T) {
	s := newTest(t, nil)
	hold := make(chan struct{})
	held := make(chan struct{})
	first := make(chan error, 1)
	go func() { // a writer that keeps the store busy until released
		_, err := s.Update(context.Background(), func(tx store.Txn) error {
			close(held)
			<-hold
			return tx.Put("machine/0", []byte("{}"))
		})
		first <- err
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() { <-started; cancel() }() // ends when the function starts
	var returned atomic.Bool
	var done atomic.Bool
	second := make(chan error, 1)
	go func() {
		_, err := s.Update(ctx, func(tx store.Txn) error {
			close(started)
			<-ctx.Done()
			done.Store(!returned.Load()) // the caller has not returned yet
			return tx.Put("machine/1", []byte("{}"))
		})
		returned.Store(true)
		second <- err
	}()
	waitQueued(t, s, 1)
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("the cancelled Update: %v", err)
	}
	if !done.Load() {
		t.Error("Update returned while its function was still running")
	}
}
