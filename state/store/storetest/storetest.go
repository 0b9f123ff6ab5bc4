// Package storetest is the conformance suite of store.Store: every engine
// (bbolt's boltstore, etcd's etcdstore) runs it from its own tests, against
// real storage, and passes the same checks of the contract in package
// store's documentation.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, feed store.Feed) store.Store {
//			return openEmptyStore(t, feed) // closed by t.Cleanup
//		})
//	}
//
// Suite adds what only some engines can do: Reopen (open the same data
// again after Close) and Peer (a second process's store over the same data
// while the first is open: etcd only); the checks that need them are
// skipped without.
//
// The suite never sleeps to let things settle: it waits for conditions
// with bounded contexts, and checks orderings, not durations.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// Open opens a new, empty store whose feed is feed. It closes the store
// when the test ends (t.Cleanup); the suite may close it earlier itself
// (Close is idempotent).
type Open func(t *testing.T, feed store.Feed) store.Store

// Suite is the conformance suite with the optional capabilities of an
// engine.
type Suite struct {
	Open Open

	// Reopen, if set, opens the data of s (a store Open returned, now
	// closed) again, with a new feed.
	Reopen func(t *testing.T, s store.Store, feed store.Feed) store.Store

	// Peer, if set, opens a second store over the data of s while s is
	// open, as another daemon of the same controller would.
	Peer func(t *testing.T, s store.Store, feed store.Feed) store.Store

	// Wait bounds every wait of the suite; 0 means 30 seconds.
	Wait time.Duration
}

// Run runs the suite with open alone.
func Run(t *testing.T, open Open) { Suite{Open: open}.Run(t) }

// Run runs every check as a subtest.
func (s Suite) Run(t *testing.T) {
	if s.Wait == 0 {
		s.Wait = 30 * time.Second
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Suite)
	}{
		{"Empty", testEmpty},
		{"PutGet", testPutGet},
		{"ValuesStayValid", testValuesStayValid},
		{"Keys", testKeys},
		{"TxnReadsItsWrites", testTxnReadsItsWrites},
		{"Scan", testScan},
		{"ScanInTxn", testScanInTxn},
		{"BadKeys", testBadKeys},
		{"FnError", testFnError},
		{"NoOp", testNoOp},
		{"Cancelled", testCancelled},
		{"Atomic", testAtomic},
		{"Counter", testCounter},
		{"Disjoint", testDisjoint},
		{"ScanConflicts", testScanConflicts},
		{"ClaimConflicts", testClaimConflicts},
		{"Nest", testNest},
		{"Feed", testFeed},
		{"FeedConcurrent", testFeedConcurrent},
		{"WaitApplied", testWaitApplied},
		{"Ephemeral", testEphemeral},
		{"EphemeralTakeOver", testEphemeralTakeOver},
		{"Elect", testElect},
		{"Health", testHealth},
		{"Close", testClose},
		{"CloseDuringUpdates", testCloseDuringUpdates},
		{"DumpLoad", testDumpLoad},
		{"Reopen", testReopen},
		{"PeerFeed", testPeerFeed},
		{"PeerConflicts", testPeerConflicts},
		{"PeerEphemeral", testPeerEphemeral},
		{"PeerElect", testPeerElect},
		{"History", testHistory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, s) })
	}
}

// Recorder is a store.Feed that keeps what it is given and checks the
// feed's ordering: revisions strictly increasing, calls never overlapping.
type Recorder struct {
	mu     sync.Mutex
	sets   []watcher.ChangeSet
	resets []uint64
	last   uint64
	in     atomic.Bool
	errs   []string
	wake   chan struct{} // closed and replaced on every call
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{wake: make(chan struct{})} }

// Feed returns the store.Feed that records into r.
func (r *Recorder) Feed() store.Feed {
	return store.Feed{Apply: r.apply, Reset: r.reset}
}

func (r *Recorder) enter() {
	if !r.in.CompareAndSwap(false, true) {
		r.mu.Lock()
		r.errs = append(r.errs, "feed calls overlap")
		r.mu.Unlock()
	}
}

func (r *Recorder) apply(cs watcher.ChangeSet) {
	r.enter()
	defer r.in.Store(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	if cs.Rev <= r.last {
		r.errs = append(r.errs, fmt.Sprintf("Apply(%d) after revision %d", cs.Rev, r.last))
	}
	r.last = cs.Rev
	cs.Changes = slices.Clone(cs.Changes)
	r.sets = append(r.sets, cs)
	close(r.wake)
	r.wake = make(chan struct{})
}

func (r *Recorder) reset(rev uint64) {
	r.enter()
	defer r.in.Store(false)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev < r.last {
		r.errs = append(r.errs, fmt.Sprintf("Reset(%d) after revision %d", rev, r.last))
	}
	r.last = rev
	r.resets = append(r.resets, rev)
	close(r.wake)
	r.wake = make(chan struct{})
}

// Sets returns a copy of the change sets applied so far.
func (r *Recorder) Sets() []watcher.ChangeSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sets)
}

// Resets returns the revisions of the Reset calls so far.
func (r *Recorder) Resets() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.resets)
}

// Last returns the revision of the last call (Apply or Reset), 0 if none.
func (r *Recorder) Last() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Set returns the change set applied at rev, if any.
func (r *Recorder) Set(rev uint64) (watcher.ChangeSet, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := slices.BinarySearchFunc(r.sets, rev, func(cs watcher.ChangeSet, rev uint64) int {
		switch {
		case cs.Rev < rev:
			return -1
		case cs.Rev > rev:
			return 1
		}
		return 0
	})
	if !ok {
		return watcher.ChangeSet{}, false
	}
	return r.sets[i], true
}

// WaitFor waits until cond holds over the recorded sets and resets (it is
// checked after every call), or ctx is done.
func (r *Recorder) WaitFor(ctx context.Context, cond func(sets []watcher.ChangeSet, resets []uint64) bool) error {
	for {
		r.mu.Lock()
		ok := cond(r.sets, r.resets)
		wake := r.wake
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Check fails t if the feed's ordering was ever broken.
func (r *Recorder) Check(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error("feed: " + e)
	}
}

// open opens a store with a new recorder, checked at the end of the test.
func (s Suite) open(t *testing.T) (store.Store, *Recorder) {
	t.Helper()
	rec := NewRecorder()
	st := s.Open(t, rec.Feed())
	t.Cleanup(func() { rec.Check(t) })
	return st, rec
}

func (s Suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.Wait)
	t.Cleanup(cancel)
	return ctx
}

func update(t testing.TB, ctx context.Context, st store.Store, fn func(store.Txn) error) uint64 {
	t.Helper()
	rev, err := st.Update(ctx, fn)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return rev
}

func put(t testing.TB, ctx context.Context, st store.Store, kv ...string) uint64 {
	t.Helper()
	return update(t, ctx, st, func(tx store.Txn) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := tx.Put(kv[i], []byte(kv[i+1])); err != nil {
				return err
			}
			tx.Record(watcher.Change{Kind: watcher.Kind(store.Kind(kv[i])), ID: store.Rest(kv[i]), Fields: []string{"put"}})
		}
		return nil
	})
}

func get(t testing.TB, ctx context.Context, st store.Store, key string) (string, bool) {
	t.Helper()
	var val []byte
	var ok bool
	err := st.View(ctx, func(r store.Reader) error {
		var err error
		val, ok, err = r.Get(key)
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return string(val), ok
}

// records returns every record visible in a view (the store's own meta
// kind left out), in scan order.
func records(t testing.TB, ctx context.Context, st store.Store, prefix string) [][2]string {
	t.Helper()
	var out [][2]string
	err := st.View(ctx, func(r store.Reader) error {
		var err error
		out, err = scanAll(r, prefix, 0)
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return out
}

func scanAll(r store.Reader, prefix string, limit int) ([][2]string, error) {
	var out [][2]string
	start := ""
	for {
		last, more, err := r.Scan(prefix, start, limit, func(k string, v []byte) error {
			if store.Kind(k) != store.MetaKind {
				out = append(out, [2]string{k, string(v)})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		start = last
	}
}

func testEmpty(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	if _, ok := get(t, ctx, st, "machine/m/0"); ok {
		t.Error("a new store has machine/m/0")
	}
	err := st.View(ctx, func(r store.Reader) error {
		if r.Revision() != st.Revision() {
			t.Errorf("view revision %d, store revision %d", r.Revision(), st.Revision())
		}
		last, more, err := r.Scan("machine/", "", 0, func(string, []byte) error {
			t.Error("scan of a new store visited a key")
			return nil
		})
		if last != "" || more || err != nil {
			t.Errorf("Scan of nothing = %q, %v, %v", last, more, err)
		}
		ok, err := r.GetFunc("machine/m/0", func([]byte) { t.Error("GetFunc called for a missing key") })
		if ok || err != nil {
			t.Errorf("GetFunc of a missing key = %v, %v", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := records(t, ctx, st, ""); len(got) != 0 {
		t.Errorf("a new store holds %v", got)
	}
	if info := st.Info(); info.Engine == "" || info.Revision != st.Revision() {
		t.Errorf("Info() = %+v, Revision() = %d", info, st.Revision())
	}
	if sets := rec.Sets(); len(sets) != 0 {
		t.Errorf("a new store applied %v", sets)
	}
}

func testPutGet(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	before := st.Revision()
	rev := put(t, ctx, st, "machine/m/0", "zero", "machine/m/1", "one")
	if rev <= before {
		t.Fatalf("Update returned revision %d, not after %d", rev, before)
	}
	// Read-your-writes once Update has returned: no waiting.
	if st.Revision() < rev {
		t.Errorf("Revision() = %d after Update returned %d", st.Revision(), rev)
	}
	if v, ok := get(t, ctx, st, "machine/m/0"); !ok || v != "zero" {
		t.Errorf("Get = %q, %v", v, ok)
	}
	err := st.View(ctx, func(r store.Reader) error {
		if r.Revision() < rev {
			t.Errorf("view revision %d before the commit's %d", r.Revision(), rev)
		}
		var got string
		ok, err := r.GetFunc("machine/m/1", func(v []byte) { got = string(v) })
		if !ok || err != nil || got != "one" {
			t.Errorf("GetFunc = %q, %v, %v", got, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite one, delete the other, in one commit.
	rev2 := update(t, ctx, st, func(tx store.Txn) error {
		if err := tx.Put("machine/m/0", []byte("ZERO")); err != nil {
			return err
		}
		return tx.Delete("machine/m/1")
	})
	if rev2 <= rev {
		t.Fatalf("second commit at %d, not after %d", rev2, rev)
	}
	if v, ok := get(t, ctx, st, "machine/m/0"); !ok || v != "ZERO" {
		t.Errorf("after overwrite Get = %q, %v", v, ok)
	}
	if _, ok := get(t, ctx, st, "machine/m/1"); ok {
		t.Error("deleted key still there")
	}
	// Put keeps a copy of the value it is given.
	buf := []byte("first")
	update(t, ctx, st, func(tx store.Txn) error {
		err := tx.Put("machine/m/2", buf)
		copy(buf, "XXXXX")
		return err
	})
	if v, _ := get(t, ctx, st, "machine/m/2"); v != "first" {
		t.Errorf("Put did not copy its value: stored %q", v)
	}
	// The feed has each commit, applied before its Update returned.
	if cs, ok := rec.Set(rev); !ok || len(cs.Changes) != 2 || cs.Changes[0].ID != "m/0" {
		t.Errorf("change set at %d = %+v, %v", rev, cs, ok)
	}
	if _, ok := rec.Set(rev2); !ok {
		t.Errorf("no change set at %d", rev2)
	}
	// Large values.
	big := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	update(t, ctx, st, func(tx store.Txn) error { return tx.Put("blob/big", big) })
	if v, _ := get(t, ctx, st, "blob/big"); v != string(big) {
		t.Errorf("256 KiB value came back as %d bytes", len(v))
	}
	// An empty value is a value.
	update(t, ctx, st, func(tx store.Txn) error { return tx.Put("blob/empty", nil) })
	if v, ok := get(t, ctx, st, "blob/empty"); !ok || v != "" {
		t.Errorf("empty value: %q, %v", v, ok)
	}
}

func testValuesStayValid(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	put(t, ctx, st, "machine/m/0", "old", "machine/m/1", "old1")
	var got, scanned []byte
	err := st.View(ctx, func(r store.Reader) error {
		var err error
		got, _, err = r.Get("machine/m/0")
		if err != nil {
			return err
		}
		_, _, err = r.Scan("machine/m/1", "", 0, func(_ string, v []byte) error {
			scanned = v
			return nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var inTxn []byte
	update(t, ctx, st, func(tx store.Txn) error {
		v, _, err := tx.Get("machine/m/0")
		inTxn = v
		if err != nil {
			return err
		}
		return tx.Put("machine/m/0", []byte("new"))
	})
	put(t, ctx, st, "machine/m/1", "new1")
	for i := range 20 { // churn, so a store reusing memory would show it
		put(t, ctx, st, "machine/m/0", strconv.Itoa(i), "machine/m/1", strconv.Itoa(i))
	}
	if string(got) != "old" || string(scanned) != "old1" || string(inTxn) != "old" {
		t.Errorf("values changed after their view ended: %q %q %q", got, scanned, inTxn)
	}
}

func testKeys(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	keys := []string{"k/\x00", "k/a", "k/a/b", "k/a\x00", "k/\xff\xfe", "k/é", "k/ ", "k/A", "k//"}
	update(t, ctx, st, func(tx store.Txn) error {
		for _, k := range keys {
			if err := tx.Put(k, []byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	slices.Sort(keys) // byte order
	got := records(t, ctx, st, "k/")
	if len(got) != len(keys) {
		t.Fatalf("scan found %d keys, want %d: %q", len(got), len(keys), got)
	}
	for i, kv := range got {
		if kv[0] != keys[i] || kv[1] != keys[i] {
			t.Errorf("scan[%d] = %q, want %q", i, kv, keys[i])
		}
	}
	for _, k := range keys {
		if v, ok := get(t, ctx, st, k); !ok || v != k {
			t.Errorf("Get(%q) = %q, %v", k, v, ok)
		}
	}
}

func testTxnReadsItsWrites(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	put(t, ctx, st, "unit/m/a", "A", "unit/m/c", "C")
	update(t, ctx, st, func(tx store.Txn) error {
		if err := tx.Put("unit/m/b", []byte("B")); err != nil {
			return err
		}
		if v, ok, _ := tx.Get("unit/m/b"); !ok || string(v) != "B" {
			t.Errorf("Txn does not see its own put: %q, %v", v, ok)
		}
		if err := tx.Delete("unit/m/a"); err != nil {
			return err
		}
		if _, ok, _ := tx.Get("unit/m/a"); ok {
			t.Error("Txn sees a key it deleted")
		}
		if ok, _ := tx.GetFunc("unit/m/a", func([]byte) {}); ok {
			t.Error("GetFunc sees a key the Txn deleted")
		}
		if err := tx.Put("unit/m/c", []byte("C2")); err != nil {
			return err
		}
		var gotC string
		tx.GetFunc("unit/m/c", func(v []byte) { gotC = string(v) })
		if gotC != "C2" {
			t.Errorf("GetFunc sees %q, not the Txn's write", gotC)
		}
		got, err := scanAll(tx, "unit/m/", 0)
		if err != nil {
			return err
		}
		want := [][2]string{{"unit/m/b", "B"}, {"unit/m/c", "C2"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Txn scan = %q, want %q", got, want)
		}
		// Put again after delete.
		if err := tx.Put("unit/m/a", []byte("A2")); err != nil {
			return err
		}
		if v, _, _ := tx.Get("unit/m/a"); string(v) != "A2" {
			t.Errorf("put after delete: %q", v)
		}
		return nil
	})
	want := [][2]string{{"unit/m/a", "A2"}, {"unit/m/b", "B"}, {"unit/m/c", "C2"}}
	if got := records(t, ctx, st, "unit/"); !reflect.DeepEqual(got, want) {
		t.Errorf("after commit: %q, want %q", got, want)
	}
}

func testScan(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	const n = 2500
	var want [][2]string
	for lo := 0; lo < n; lo += 100 {
		update(t, ctx, st, func(tx store.Txn) error {
			for i := lo; i < lo+100; i++ {
				k := fmt.Sprintf("machine/m/%05d", i)
				if err := tx.Put(k, []byte(strconv.Itoa(i))); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i := range n {
		want = append(want, [2]string{fmt.Sprintf("machine/m/%05d", i), strconv.Itoa(i)})
	}
	put(t, ctx, st, "machine/l/0", "before", "machine/n/0", "after", "machinex/m/0", "other kind")
	err := st.View(ctx, func(r store.Reader) error {
		// Pages of at most MaxScan, whatever the limit asked.
		for _, limit := range []int{0, -1, store.MaxScan + 1, 1 << 30} {
			visited := 0
			last, more, err := r.Scan("machine/m/", "", limit, func(string, []byte) error {
				visited++
				return nil
			})
			if err != nil {
				return err
			}
			if visited != store.MaxScan || !more || last != want[store.MaxScan-1][0] {
				t.Errorf("Scan limit %d: visited %d, last %q, more %v", limit, visited, last, more)
			}
		}
		// Paging through, in order, with several limits.
		for _, limit := range []int{1, 7, 999, 1000} {
			got, err := scanAll(r, "machine/m/", limit)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("paged by %d: %d keys, want %d", limit, len(got), len(want))
			}
		}
		// An exact last page says there is no more.
		last, more, err := r.Scan("machine/m/", want[n-11][0], 10, func(string, []byte) error { return nil })
		if err != nil || more || last != want[n-1][0] {
			t.Errorf("last page: %q, %v, %v", last, more, err)
		}
		// Start in the middle (exclusive), and at a key that is not there.
		var first string
		_, _, err = r.Scan("machine/m/", want[41][0], 1, func(k string, _ []byte) error { first = k; return nil })
		if err != nil || first != want[42][0] {
			t.Errorf("scan after %q starts at %q (%v)", want[41][0], first, err)
		}
		_, _, err = r.Scan("machine/m/", want[41][0]+"x", 1, func(k string, _ []byte) error { first = k; return nil })
		if err != nil || first != want[42][0] {
			t.Errorf("scan after a missing key starts at %q (%v)", first, err)
		}
		// A start before the prefix starts at the prefix.
		_, _, err = r.Scan("machine/m/", "machine/a", 1, func(k string, _ []byte) error { first = k; return nil })
		if err != nil || first != want[0][0] {
			t.Errorf("scan after a start before the prefix starts at %q (%v)", first, err)
		}
		// A prefix that is a whole key, and one matching nothing.
		got, err := scanAll(r, "machine/m/00042", 0)
		if err != nil || len(got) != 1 || got[0][0] != want[42][0] {
			t.Errorf("scan of one key: %q, %v", got, err)
		}
		got, err = scanAll(r, "machine/z", 0)
		if err != nil || len(got) != 0 {
			t.Errorf("scan of nothing: %q, %v", got, err)
		}
		// A prefix without the kind's slash covers neighbouring kinds.
		got, err = scanAll(r, "machine", 0)
		if err != nil || len(got) != n+3 || got[n+2][0] != "machinex/m/0" {
			t.Errorf("scan of \"machine\": %d keys (%v)", len(got), err)
		}
		// An error from fn stops the scan and is returned as it is.
		stop := errors.New("stop here")
		calls := 0
		_, _, err = r.Scan("machine/m/", "", 0, func(string, []byte) error {
			calls++
			if calls == 3 {
				return stop
			}
			return nil
		})
		if err != stop || calls != 3 {
			t.Errorf("scan with a failing fn: %v after %d calls", err, calls)
		}
		// Every record.
		all, err := scanAll(r, "", 0)
		if err != nil || len(all) != n+3 {
			t.Errorf("scan of everything: %d records (%v)", len(all), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testScanInTxn(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	var kv []string
	for i := range 10 {
		kv = append(kv, fmt.Sprintf("app/m/%02d", 2*i), "stored")
	}
	put(t, ctx, st, kv...)
	update(t, ctx, st, func(tx store.Txn) error {
		// Buffered puts between, before and after stored keys; a
		// buffered delete of a stored key; an overwrite.
		for _, k := range []string{"app/m/01", "app/m/05", "app/m/99", "app/m/"} {
			if err := tx.Put(k, []byte("buffered")); err != nil {
				return err
			}
		}
		if err := tx.Delete("app/m/04"); err != nil {
			return err
		}
		if err := tx.Put("app/m/06", []byte("overwritten")); err != nil {
			return err
		}
		var want [][2]string
		want = append(want, [2]string{"app/m/", "buffered"})
		for i := range 10 {
			k := fmt.Sprintf("app/m/%02d", 2*i)
			switch k {
			case "app/m/02":
				want = append(want, [2]string{"app/m/01", "buffered"}, [2]string{k, "stored"})
			case "app/m/04":
			case "app/m/06":
				want = append(want, [2]string{"app/m/05", "buffered"}, [2]string{k, "overwritten"})
			default:
				want = append(want, [2]string{k, "stored"})
			}
		}
		want = append(want, [2]string{"app/m/99", "buffered"})
		for _, limit := range []int{1, 2, 3, 100} {
			got, err := scanAll(tx, "app/m/", limit)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("txn scan by %d:\n got %q\nwant %q", limit, got, want)
			}
		}
		return nil
	})
}

func testBadKeys(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	for _, key := range []string{"", "nokind", "/rest", "meta/x", "meta/"} {
		var putErr, delErr error
		_, err := st.Update(ctx, func(tx store.Txn) error {
			putErr = tx.Put(key, []byte("v"))
			delErr = tx.Delete(key)
			return tx.Put("good/key", []byte("v"))
		})
		if !errors.Is(putErr, store.ErrBadKey) || !errors.Is(delErr, store.ErrBadKey) {
			t.Errorf("key %q: Put %v, Delete %v; want ErrBadKey", key, putErr, delErr)
		}
		if err != nil {
			t.Errorf("key %q: the rest of the transaction failed: %v", key, err)
		}
		if rel, err := st.Ephemeral(ctx, key, []byte("v")); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("Ephemeral(%q) = %v, want ErrBadKey", key, err)
			if rel != nil {
				rel()
			}
		}
		// A refused write was not buffered.
		if v, ok := get(t, ctx, st, key); ok && key != "" {
			t.Errorf("refused key %q stored %q", key, v)
		}
	}
	if got := records(t, ctx, st, ""); len(got) != 1 || got[0][0] != "good/key" {
		t.Errorf("records after bad keys: %q", got)
	}
}

func testFnError(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	put(t, ctx, st, "machine/m/0", "kept")
	before, applied := st.Revision(), len(rec.Sets())
	boom := errors.New("boom")
	calls := 0
	rev, err := st.Update(ctx, func(tx store.Txn) error {
		calls++
		tx.Put("machine/m/0", []byte("lost"))
		tx.Put("machine/m/1", []byte("lost"))
		tx.Delete("machine/m/0")
		tx.Record(watcher.Change{Kind: "machine", ID: "m/1"})
		return boom
	})
	if err != boom {
		t.Fatalf("Update returned %v, want the fn's error as it is", err)
	}
	if rev != 0 {
		t.Errorf("failed Update returned revision %d", rev)
	}
	if calls != 1 {
		t.Errorf("failing fn ran %d times", calls)
	}
	if st.Revision() != before {
		t.Errorf("a failed fn moved the revision from %d to %d", before, st.Revision())
	}
	if v, _ := get(t, ctx, st, "machine/m/0"); v != "kept" {
		t.Errorf("a failed fn's write landed: %q", v)
	}
	if _, ok := get(t, ctx, st, "machine/m/1"); ok {
		t.Error("a failed fn's put landed")
	}
	// The next commit is the next revision: the failure spent none.
	rev = put(t, ctx, st, "machine/m/2", "x")
	sets := rec.Sets()
	if len(sets) != applied+1 || sets[len(sets)-1].Rev != rev {
		t.Errorf("feed after a failure: %d sets (want %d), last %+v", len(sets), applied+1, sets[len(sets)-1])
	}
}

func testNoOp(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	put(t, ctx, st, "machine/m/0", "v")
	before, applied := st.Revision(), len(rec.Sets())
	for name, fn := range map[string]func(store.Txn) error{
		"nothing": func(store.Txn) error { return nil },
		"reads": func(tx store.Txn) error {
			_, _, err := tx.Get("machine/m/0")
			return err
		},
		"records only": func(tx store.Txn) error {
			tx.Record(watcher.Change{Kind: "machine", ID: "m/0", Fields: []string{"x"}})
			return nil
		},
		"deletes a missing key": func(tx store.Txn) error { return tx.Delete("machine/m/404") },
		"undone by Nest": func(tx store.Txn) error {
			tx.Nest(func() error {
				tx.Put("machine/m/1", []byte("v"))
				tx.Record(watcher.Change{Kind: "machine", ID: "m/1"})
				return errors.New("undo")
			})
			return nil
		},
	} {
		rev, err := st.Update(ctx, fn)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if rev != before {
			t.Errorf("%s: Update returned revision %d, want the revision read (%d)", name, rev, before)
		}
		if st.Revision() != before {
			t.Errorf("%s: revision moved to %d", name, st.Revision())
		}
	}
	if sets := rec.Sets(); len(sets) != applied {
		t.Errorf("no-op functions were applied: %+v", sets[applied:])
	}
	if _, ok := get(t, ctx, st, "machine/m/1"); ok {
		t.Error("the write undone by Nest landed")
	}
}

func testCancelled(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := st.Revision()
	_, err := st.Update(ctx, func(tx store.Txn) error { return tx.Put("machine/m/0", []byte("v")) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a cancelled context: %v", err)
	}
	if st.Revision() != before {
		t.Error("a cancelled Update committed")
	}
	if err := st.WaitApplied(ctx, before+1<<40); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitApplied with a cancelled context: %v", err)
	}
}

// testAtomic: readers never see part of a commit.
func testAtomic(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	const keys, gens = 50, 20
	write := func(gen int) {
		update(t, ctx, st, func(tx store.Txn) error {
			for i := range keys {
				if err := tx.Put(fmt.Sprintf("unit/m/%02d", i), []byte(strconv.Itoa(gen))); err != nil {
					return err
				}
			}
			return nil
		})
	}
	write(0)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var views atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				err := st.View(ctx, func(r store.Reader) error {
					got, err := scanAll(r, "unit/m/", 7)
					if err != nil {
						return err
					}
					if len(got) != keys {
						return fmt.Errorf("view has %d keys", len(got))
					}
					for _, kv := range got {
						if kv[1] != got[0][1] {
							return fmt.Errorf("view mixes generations %s and %s", got[0][1], kv[1])
						}
					}
					v, _, err := r.Get("unit/m/00")
					if err == nil && string(v) != got[0][1] {
						return fmt.Errorf("r.Get sees generation %s, Scan %s", v, got[0][1])
					}
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				views.Add(1)
			}
		}()
	}
	for gen := 1; gen <= gens; gen++ {
		write(gen)
	}
	close(done)
	wg.Wait()
	// A transaction that fails half way leaves nothing.
	update(t, ctx, st, func(tx store.Txn) error {
		tx.Put("unit/m/00", []byte("half"))
		return tx.Nest(func() error { return nil })
	})
	_, err := st.Update(ctx, func(tx store.Txn) error {
		for i := range keys {
			tx.Put(fmt.Sprintf("unit/m/%02d", i), []byte("never"))
		}
		return errors.New("half way")
	})
	if err == nil {
		t.Fatal("failing Update succeeded")
	}
	for _, kv := range records(t, ctx, st, "unit/m/") {
		if kv[1] == "never" {
			t.Fatalf("a failed transaction's write landed: %q", kv)
		}
	}
}

// increment adds one to the decimal counter under key (missing = 0).
func increment(tx store.Txn, key string) error {
	v, _, err := tx.Get(key)
	if err != nil {
		return err
	}
	n := 0
	if len(v) > 0 {
		if n, err = strconv.Atoi(string(v)); err != nil {
			return err
		}
	}
	return tx.Put(key, []byte(strconv.Itoa(n+1)))
}

// testCounter: concurrent read-modify-writes of one key lose nothing.
func testCounter(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	const workers, each = 8, 25
	revs := make(chan uint64, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				rev, err := st.Update(ctx, func(tx store.Txn) error {
					tx.Record(watcher.Change{Kind: "counter", ID: strconv.Itoa(w)})
					if err := increment(tx, "counter/shared"); err != nil {
						return err
					}
					return increment(tx, "counter/"+strconv.Itoa(w))
				})
				if err != nil {
					t.Error(err)
					return
				}
				revs <- rev
			}
		}()
	}
	wg.Wait()
	close(revs)
	if v, _ := get(t, ctx, st, "counter/shared"); v != strconv.Itoa(workers*each) {
		t.Errorf("shared counter = %s, want %d", v, workers*each)
	}
	for w := range workers {
		if v, _ := get(t, ctx, st, "counter/"+strconv.Itoa(w)); v != strconv.Itoa(each) {
			t.Errorf("counter %d = %s, want %d", w, v, each)
		}
	}
	// Every commit is a distinct revision with its own change set.
	seen := map[uint64]bool{}
	for rev := range revs {
		if seen[rev] {
			t.Errorf("revision %d returned twice", rev)
		}
		seen[rev] = true
		if cs, ok := rec.Set(rev); !ok || len(cs.Changes) != 1 {
			t.Errorf("change set at %d: %+v, %v", rev, cs, ok)
		}
	}
}

// testDisjoint: writers of disjoint keys never conflict, so each function
// runs once.
func testDisjoint(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	const workers, each = 8, 20
	var calls atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "counter/" + strconv.Itoa(w)
			for range each {
				_, err := st.Update(ctx, func(tx store.Txn) error {
					calls.Add(1)
					return increment(tx, key)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := calls.Load(); n != workers*each {
		t.Errorf("%d function calls for %d Updates of disjoint keys", n, workers*each)
	}
	for w := range workers {
		if v, _ := get(t, ctx, st, "counter/"+strconv.Itoa(w)); v != strconv.Itoa(each) {
			t.Errorf("counter %d = %s, want %d", w, v, each)
		}
	}
}

// testScanConflicts: a decision taken from a scan holds against concurrent
// inserts into the scanned range (no phantom).
func testScanConflicts(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	const limit, workers = 30, 6
	var wg sync.WaitGroup
	var added atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				full := false
				_, err := st.Update(ctx, func(tx store.Txn) error {
					got, err := scanAll(tx, "seat/m/", 7) // several pages
					if err != nil {
						return err
					}
					if full = len(got) >= limit; full {
						return nil
					}
					return tx.Put(fmt.Sprintf("seat/m/%d-%03d", w, i), []byte("taken"))
				})
				if err != nil {
					t.Error(err)
					return
				}
				if full {
					return
				}
				added.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := records(t, ctx, st, "seat/m/"); len(got) != limit || added.Load() != limit {
		t.Errorf("%d seats taken (%d acknowledged), limit %d", len(got), added.Load(), limit)
	}
}

// testClaimConflicts: a key found by a scan and removed is claimed once,
// however many writers race for it (removals of scanned keys conflict).
func testClaimConflicts(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	const jobs, workers = 40, 6
	var kv []string
	for i := range jobs {
		kv = append(kv, fmt.Sprintf("job/m/%03d", i), "todo")
	}
	put(t, ctx, st, kv...)
	var wg sync.WaitGroup
	var claims sync.Map
	var claimed atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var job string
				_, err := st.Update(ctx, func(tx store.Txn) error {
					job = ""
					_, _, err := tx.Scan("job/m/", "", 1, func(k string, _ []byte) error {
						job = k
						return nil
					})
					if err != nil || job == "" {
						return err
					}
					if err := tx.Delete(job); err != nil {
						return err
					}
					return tx.Put("done/"+store.Rest(job), []byte(strconv.Itoa(w)))
				})
				if err != nil {
					t.Error(err)
					return
				}
				if job == "" {
					return
				}
				claimed.Add(1)
				if prev, dup := claims.LoadOrStore(job, w); dup {
					t.Errorf("job %s claimed by %d and %d", job, prev, w)
				}
			}
		}()
	}
	wg.Wait()
	if n := claimed.Load(); n != jobs {
		t.Errorf("%d claims of %d jobs", n, jobs)
	}
	if got := records(t, ctx, st, "done/"); len(got) != jobs {
		t.Errorf("%d jobs done", len(got))
	}
	if got := records(t, ctx, st, "job/"); len(got) != 0 {
		t.Errorf("jobs left: %q", got)
	}
}

func testNest(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	put(t, ctx, st, "unit/m/keep", "stored", "unit/m/del", "stored")
	errA, errB := errors.New("a"), errors.New("b")
	rev := update(t, ctx, st, func(tx store.Txn) error {
		tx.Put("unit/m/1", []byte("outer"))
		tx.Record(watcher.Change{Kind: "unit", ID: "1"})
		// A failing part: its put, overwrite, delete and change undone.
		err := tx.Nest(func() error {
			tx.Put("unit/m/2", []byte("undone"))
			tx.Put("unit/m/1", []byte("overwritten"))
			tx.Put("unit/m/keep", []byte("overwritten"))
			tx.Delete("unit/m/del")
			tx.Record(watcher.Change{Kind: "unit", ID: "2"})
			return errA
		})
		if err != errA {
			t.Errorf("Nest returned %v, want its fn's error as it is", err)
		}
		if v, _, _ := tx.Get("unit/m/1"); string(v) != "outer" {
			t.Errorf("after a failed part unit/m/1 = %q", v)
		}
		if v, _, _ := tx.Get("unit/m/keep"); string(v) != "stored" {
			t.Errorf("after a failed part unit/m/keep = %q", v)
		}
		if _, ok, _ := tx.Get("unit/m/del"); !ok {
			t.Error("a failed part's delete was not undone")
		}
		if _, ok, _ := tx.Get("unit/m/2"); ok {
			t.Error("a failed part's put was not undone")
		}
		// A part that succeeds with a failing part inside.
		err = tx.Nest(func() error {
			tx.Put("unit/m/3", []byte("kept"))
			tx.Record(watcher.Change{Kind: "unit", ID: "3"})
			if err := tx.Nest(func() error {
				tx.Put("unit/m/4", []byte("undone"))
				tx.Delete("unit/m/3")
				tx.Record(watcher.Change{Kind: "unit", ID: "4"})
				return errB
			}); err != errB {
				t.Errorf("inner Nest returned %v", err)
			}
			if v, _, _ := tx.Get("unit/m/3"); string(v) != "kept" {
				t.Errorf("inner undo removed the outer part's write: %q", v)
			}
			return tx.Nest(func() error {
				tx.Put("unit/m/5", []byte("kept"))
				tx.Record(watcher.Change{Kind: "unit", ID: "5"})
				return nil
			})
		})
		if err != nil {
			t.Errorf("succeeding Nest: %v", err)
		}
		// A succeeding part inside a failing one is undone with it.
		tx.Nest(func() error {
			tx.Nest(func() error {
				tx.Put("unit/m/6", []byte("undone"))
				tx.Record(watcher.Change{Kind: "unit", ID: "6"})
				return nil
			})
			return errA
		})
		return nil
	})
	want := [][2]string{
		{"unit/m/1", "outer"}, {"unit/m/3", "kept"}, {"unit/m/5", "kept"},
		{"unit/m/del", "stored"}, {"unit/m/keep", "stored"},
	}
	if got := records(t, ctx, st, "unit/"); !reflect.DeepEqual(got, want) {
		t.Errorf("after the commit:\n got %q\nwant %q", got, want)
	}
	cs, ok := rec.Set(rev)
	var ids []string
	for _, c := range cs.Changes {
		ids = append(ids, c.ID)
	}
	if !ok || !reflect.DeepEqual(ids, []string{"1", "3", "5"}) {
		t.Errorf("change set %v (%v), want the changes of the parts that held: 1 3 5", ids, ok)
	}
}

func changesEqual(a, b []watcher.Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Kind != y.Kind || x.Model != y.Model || x.ID != y.ID || x.Parent != y.Parent || !slices.Equal(x.Fields, y.Fields) {
			return false
		}
	}
	return true
}

func testFeed(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	changes := []watcher.Change{
		{Kind: "machine", Model: "model-uuid", ID: "0/lxd/1", Parent: "0", Fields: []string{watcher.FieldCreated, watcher.FieldLife}},
		{Kind: "user", ID: "bob"},
		{Kind: "unit", Model: "m", ID: "app/0", Fields: []string{"é\x00ünïcode", ""}},
	}
	var revs []uint64
	for i := range 5 {
		rev := update(t, ctx, st, func(tx store.Txn) error {
			for _, c := range changes {
				tx.Record(c)
			}
			return tx.Put("machine/m/0", []byte(strconv.Itoa(i)))
		})
		// Applied before Update returned.
		cs, ok := rec.Set(rev)
		if !ok {
			t.Fatalf("revision %d not applied when its Update returned", rev)
		}
		if !changesEqual(cs.Changes, changes) {
			t.Errorf("applied %+v, want %+v", cs.Changes, changes)
		}
		revs = append(revs, rev)
	}
	// A commit whose function recorded no change is still a revision; the
	// feed may or may not carry it, but in order.
	rev := update(t, ctx, st, func(tx store.Txn) error { return tx.Put("machine/m/1", nil) })
	if rev <= revs[len(revs)-1] {
		t.Errorf("commit without changes at %d, not after %d", rev, revs[len(revs)-1])
	}
	if cs, ok := rec.Set(rev); ok && len(cs.Changes) != 0 {
		t.Errorf("a commit without changes applied %+v", cs)
	}
	if len(rec.Resets()) != 0 {
		t.Errorf("Reset called: %v", rec.Resets())
	}
}

func testFeedConcurrent(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	const workers, each = 8, 25
	type commit struct {
		rev uint64
		id  string
	}
	commits := make(chan commit, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("%d-%d", w, i)
				rev, err := st.Update(ctx, func(tx store.Txn) error {
					tx.Record(watcher.Change{Kind: "machine", ID: id})
					if i%5 == 0 {
						// A shared key too, so some commits conflict.
						if err := increment(tx, "counter/shared"); err != nil {
							return err
						}
					}
					return tx.Put("machine/m/"+id, []byte(id))
				})
				if err != nil {
					t.Error(err)
					return
				}
				if _, ok := rec.Set(rev); !ok {
					t.Errorf("revision %d not applied when its Update returned", rev)
				}
				commits <- commit{rev, id}
			}
		}()
	}
	wg.Wait()
	close(commits)
	// Each commit's change exactly once in the feed, in the change set of
	// the revision its Update returned (commits that went together, as
	// etcd's group commit sends them, share one revision and one change
	// set; a commit's change is never in another's).
	revOf := map[string]uint64{}
	for c := range commits {
		revOf[c.id] = c.rev
	}
	if len(revOf) != workers*each {
		t.Fatalf("%d commits acknowledged, want %d", len(revOf), workers*each)
	}
	seen := map[string]int{}
	for _, cs := range rec.Sets() {
		for _, c := range cs.Changes {
			rev, ours := revOf[c.ID]
			if !ours {
				continue
			}
			seen[c.ID]++
			if rev != cs.Rev {
				t.Errorf("change of %s applied at revision %d, its Update returned %d", c.ID, cs.Rev, rev)
			}
		}
	}
	for id := range revOf {
		if seen[id] != 1 {
			t.Errorf("change of %s applied %d times, want once", id, seen[id])
		}
	}
}

func testWaitApplied(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	rev := put(t, ctx, st, "machine/m/0", "v")
	if err := st.WaitApplied(ctx, rev); err != nil {
		t.Errorf("WaitApplied(%d) of an applied revision: %v", rev, err)
	}
	if err := st.WaitApplied(ctx, 0); err != nil {
		t.Errorf("WaitApplied(0): %v", err)
	}
	// A waiter for the next commit is woken by it.
	next := st.Revision() + 1
	done := make(chan error, 1)
	go func() { done <- st.WaitApplied(ctx, next) }()
	rev2 := put(t, ctx, st, "machine/m/0", "w")
	if rev2 < next {
		t.Fatalf("commit at %d", rev2)
	}
	if err := <-done; err != nil {
		t.Errorf("WaitApplied(%d): %v", next, err)
	}
	// A revision far ahead is not reached: the context ends the wait.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := st.WaitApplied(short, st.Revision()+1<<40); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitApplied of a revision far ahead: %v", err)
	}
}

func findChange(sets []watcher.ChangeSet, kind, id, field string) (uint64, bool) {
	for _, cs := range sets {
		for _, c := range cs.Changes {
			if string(c.Kind) == kind && c.ID == id && c.Has(field) {
				return cs.Rev, true
			}
		}
	}
	return 0, false
}

func testEphemeral(t *testing.T, s Suite) {
	st, rec := s.open(t)
	ctx := s.ctx(t)
	release, err := st.Ephemeral(ctx, "apiaddr/daemon-1", []byte("10.0.0.1:17070"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, ctx, st, "apiaddr/daemon-1"); !ok || v != "10.0.0.1:17070" {
		t.Errorf("Get of an ephemeral key = %q, %v (read-your-writes)", v, ok)
	}
	if _, ok := findChange(rec.Sets(), "apiaddr", "daemon-1", watcher.FieldCreated); !ok {
		t.Errorf("no created change for the ephemeral key in %+v", rec.Sets())
	}
	got := records(t, ctx, st, "apiaddr/")
	if len(got) != 1 {
		t.Errorf("scan of ephemeral keys: %q", got)
	}
	release()
	err = rec.WaitFor(ctx, func(sets []watcher.ChangeSet, _ []uint64) bool {
		_, ok := findChange(sets, "apiaddr", "daemon-1", watcher.FieldRemoved)
		return ok
	})
	if err != nil {
		t.Fatalf("no removed change after release: %v", err)
	}
	if _, ok := get(t, ctx, st, "apiaddr/daemon-1"); ok {
		t.Error("ephemeral key still there after release (and its removal applied)")
	}
	release() // idempotent
	// Two keys, one released; the other goes at Close (checked with a
	// peer in PeerEphemeral).
	r1, err := st.Ephemeral(ctx, "apiaddr/a", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer r1()
	r2, err := st.Ephemeral(ctx, "apiaddr/b", []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	r2()
	r2()
	if err := rec.WaitFor(ctx, func(sets []watcher.ChangeSet, _ []uint64) bool {
		_, ok := findChange(sets, "apiaddr", "b", watcher.FieldRemoved)
		return ok
	}); err != nil {
		t.Fatal(err)
	}
	if got := records(t, ctx, st, "apiaddr/"); len(got) != 1 || got[0][0] != "apiaddr/a" {
		t.Errorf("ephemeral keys: %q", got)
	}
}

// testEphemeralTakeOver: a later Ephemeral of a key this process holds
// replaces its value (a created change each); the earlier release is then
// a no-op, the later one removes the key; a peer (where the engine has
// peers) reads the latest value.
func testEphemeralTakeOver(t *testing.T, s Suite) {
	a, recA := s.open(t)
	ctx := s.ctx(t)
	r1, err := a.Ephemeral(ctx, "apiaddr/me", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.Ephemeral(ctx, "apiaddr/me", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, ctx, a, "apiaddr/me"); !ok || v != "two" {
		t.Errorf("after the second Ephemeral the key reads %q, %v; want two", v, ok)
	}
	r1() // taken over: leaves the key alone
	if v, ok := get(t, ctx, a, "apiaddr/me"); !ok || v != "two" {
		t.Errorf("the earlier release removed the key taken over: it reads %q, %v", v, ok)
	}
	if s.Peer != nil {
		b, _ := s.peer(t, a)
		if err := b.WaitApplied(ctx, a.Revision()); err != nil {
			t.Fatal(err)
		}
		if v, ok := get(t, ctx, b, "apiaddr/me"); !ok || v != "two" {
			t.Errorf("peer reads %q, %v; want two", v, ok)
		}
	}
	r2()
	if err := recA.WaitFor(ctx, func(sets []watcher.ChangeSet, _ []uint64) bool {
		_, ok := findChange(sets, "apiaddr", "me", watcher.FieldRemoved)
		return ok
	}); err != nil {
		t.Fatalf("no removed change after the later release: %v", err)
	}
	if _, ok := get(t, ctx, a, "apiaddr/me"); ok {
		t.Error("the key is still there after the later release")
	}
}

func testElect(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	leading, resign, err := st.Elect(ctx, "cleanup")
	if err != nil {
		t.Fatal(err)
	}
	if leading.Err() != nil {
		t.Fatal("leading context done at once")
	}
	resign()
	if err := waitDone(ctx, leading); err != nil {
		t.Fatal("leading context not cancelled by resign")
	}
	resign() // idempotent
	// Goroutines taking turns: one leader at a time.
	var inside atomic.Int32
	var turns atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				leading, resign, err := st.Elect(ctx, "cleanup")
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d leaders at once", n)
				}
				turns.Add(1)
				runtime.Gosched()
				inside.Add(-1)
				resign()
				if err := waitDone(ctx, leading); err != nil {
					t.Error("leading context not cancelled by resign")
				}
			}
		}()
	}
	wg.Wait()
	if turns.Load() != 12 {
		t.Errorf("%d turns", turns.Load())
	}
	// Different names do not exclude each other.
	l1, r1, err := st.Elect(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	l2, r2, err := st.Elect(ctx, "two")
	if err != nil {
		t.Fatal(err)
	}
	if l1.Err() != nil || l2.Err() != nil {
		t.Error("leading contexts of two names done")
	}
	r2()
	// A cancelled campaign returns the context's error.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, _, err := st.Elect(short, "one"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Elect while another leads, cancelled: %v", err)
	}
	// Close ends leadership.
	st.Close()
	if err := waitDone(ctx, l1); err != nil {
		t.Error("leading context not cancelled by Close")
	}
	r1() // resigning after Close is harmless
	if _, _, err := st.Elect(ctx, "one"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Elect after Close: %v", err)
	}
}

func waitDone(ctx context.Context, c context.Context) error {
	select {
	case <-c.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func testHealth(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	if err := st.Health(ctx); err != nil {
		t.Errorf("Health of an open store: %v", err)
	}
	st.Close()
	if err := st.Health(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Health after Close: %v", err)
	}
}

func testClose(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	put(t, ctx, st, "machine/m/0", "v")
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := st.View(ctx, func(store.Reader) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close: %v", err)
	}
	called := false
	if _, err := st.Update(ctx, func(store.Txn) error { called = true; return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close: %v", err)
	}
	if called {
		t.Error("Update after Close ran its function")
	}
	if _, err := st.Ephemeral(ctx, "apiaddr/x", nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ephemeral after Close: %v", err)
	}
	if err := st.WaitApplied(ctx, st.Revision()+1); !errors.Is(err, store.ErrClosed) {
		t.Errorf("WaitApplied after Close: %v", err)
	}
}

// testCloseDuringUpdates: Close waits for the Updates in progress; each
// either committed (and is there after reopening) or failed with ErrClosed.
func testCloseDuringUpdates(t *testing.T, s Suite) {
	st, _ := s.open(t)
	ctx := s.ctx(t)
	var acked sync.Map
	var wg sync.WaitGroup
	started := make(chan struct{}, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("machine/m/%d-%d", w, i)
				_, err := st.Update(ctx, func(tx store.Txn) error { return tx.Put(key, []byte("v")) })
				if errors.Is(err, store.ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Update racing Close: %v", err)
					return
				}
				acked.Store(key, true)
				if i == 2 {
					started <- struct{}{}
				}
			}
		}()
	}
	for range 4 {
		<-started
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if s.Reopen == nil {
		return
	}
	st2 := s.Reopen(t, st, NewRecorder().Feed())
	acked.Range(func(k, _ any) bool {
		if _, ok := get(t, ctx, st2, k.(string)); !ok {
			t.Errorf("acknowledged write %s lost across Close", k)
		}
		return true
	})
}

func testDumpLoad(t *testing.T, s Suite) {
	st, _ := s.open(t)
	d, ok1 := st.(store.Dumper)
	if !ok1 {
		t.Skip("not a store.Dumper")
	}
	ctx := s.ctx(t)
	const n = 3000
	var want [][2]string
	for lo := 0; lo < n; lo += 500 {
		update(t, ctx, st, func(tx store.Txn) error {
			for i := lo; i < lo+500; i++ {
				k := fmt.Sprintf("%s/m/%05d", []string{"machine", "unit", "app"}[i%3], i)
				v := strings.Repeat(strconv.Itoa(i), 1+i%50)
				if err := tx.Put(k, []byte(v)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	release, err := st.Ephemeral(ctx, "apiaddr/me", []byte("not dumped"))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	want = records(t, ctx, st, "")
	var got [][2]string
	rev, err := d.Dump(ctx, func(k string, v []byte) error {
		got = append(got, [2]string{k, string(v)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rev == 0 || rev > st.Revision() {
		t.Errorf("Dump at revision %d, store at %d", rev, st.Revision())
	}
	var wantNoEph [][2]string
	for _, kv := range want {
		if kv[0] != "apiaddr/me" {
			wantNoEph = append(wantNoEph, kv)
		}
	}
	if !reflect.DeepEqual(got, wantNoEph) {
		t.Fatalf("Dump gave %d records, want %d (ephemeral keys are not dumped)", len(got), len(wantNoEph))
	}
	stop := errors.New("stop")
	if _, err := d.Dump(ctx, func(string, []byte) error { return stop }); err != stop {
		t.Errorf("Dump with a failing fn: %v", err)
	}

	dst, _ := s.open(t)
	l, ok := dst.(store.Loader)
	if !ok {
		t.Skip("not a store.Loader")
	}
	next := func(kvs [][2]string) func() (string, []byte, error) {
		i := 0
		return func() (string, []byte, error) {
			if i == len(kvs) {
				return "", nil, io.EOF
			}
			i++
			return kvs[i-1][0], []byte(kvs[i-1][1]), nil
		}
	}
	loaded, err := l.Load(ctx, next(got))
	if err != nil {
		t.Fatal(err)
	}
	if loaded != len(got) {
		t.Errorf("Load loaded %d of %d", loaded, len(got))
	}
	if back := records(t, ctx, dst, ""); !reflect.DeepEqual(back, got) {
		t.Errorf("loaded store holds %d records, want %d", len(back), len(got))
	}
	// The loaded store works as any other.
	put(t, ctx, dst, "machine/m/new", "v")
	// A non-empty store refuses a load and keeps what it has.
	if _, err := l.Load(ctx, next([][2]string{{"other/x", "y"}})); err == nil {
		t.Error("Load into a non-empty store succeeded")
	}
	if _, ok := get(t, ctx, dst, "other/x"); ok {
		t.Error("refused Load wrote a record")
	}
	// Bad keys in a dump are refused.
	empty, _ := s.open(t)
	if _, err := empty.(store.Loader).Load(ctx, next([][2]string{{"meta/x", "y"}})); !errors.Is(err, store.ErrBadKey) {
		t.Errorf("Load of a meta key: %v", err)
	}
	// An error from next is returned.
	boom := errors.New("boom")
	if _, err := empty.(store.Loader).Load(ctx, func() (string, []byte, error) { return "", nil, boom }); !errors.Is(err, boom) {
		t.Errorf("Load with a failing next: %v", err)
	}
}

func testReopen(t *testing.T, s Suite) {
	if s.Reopen == nil {
		t.Skip("the engine cannot reopen")
	}
	st, _ := s.open(t)
	ctx := s.ctx(t)
	rev := put(t, ctx, st, "machine/m/0", "durable", "machine/m/1", "x")
	update(t, ctx, st, func(tx store.Txn) error { return tx.Delete("machine/m/1") })
	last := st.Revision()
	st.Close()
	rec := NewRecorder()
	st2 := s.Reopen(t, st, rec.Feed())
	if v, ok := get(t, ctx, st2, "machine/m/0"); !ok || v != "durable" {
		t.Errorf("after reopen Get = %q, %v", v, ok)
	}
	if _, ok := get(t, ctx, st2, "machine/m/1"); ok {
		t.Error("deleted key back after reopen")
	}
	if st2.Revision() < last {
		t.Errorf("reopened at revision %d, before %d", st2.Revision(), last)
	}
	rev2 := put(t, ctx, st2, "machine/m/2", "y")
	if rev2 <= rev || rev2 <= last {
		t.Errorf("commit after reopen at %d, not after %d", rev2, last)
	}
	if _, ok := rec.Set(rev2); !ok {
		t.Error("reopened store's feed missed its commit")
	}
	rec.Check(t)
}

func (s Suite) peer(t *testing.T, st store.Store) (store.Store, *Recorder) {
	if s.Peer == nil {
		t.Skip("the engine serves one process")
	}
	rec := NewRecorder()
	p := s.Peer(t, st, rec.Feed())
	t.Cleanup(func() { rec.Check(t) })
	return p, rec
}

// testPeerFeed: a commit through one store reaches the other's feed, at
// the same revision, with the same changes, in order and without gaps.
func testPeerFeed(t *testing.T, s Suite) {
	a, recA := s.open(t)
	b, recB := s.peer(t, a)
	ctx := s.ctx(t)
	var revs []uint64
	for i := range 20 {
		st := a
		if i%3 == 2 {
			st = b
		}
		revs = append(revs, update(t, ctx, st, func(tx store.Txn) error {
			tx.Record(watcher.Change{Kind: "machine", Model: "m", ID: strconv.Itoa(i), Fields: []string{"x"}})
			return tx.Put("machine/m/"+strconv.Itoa(i), []byte("v"))
		}))
	}
	last := revs[len(revs)-1]
	for _, st := range []store.Store{a, b} {
		if err := st.WaitApplied(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range []*Recorder{recA, recB} {
		for i, rev := range revs {
			cs, ok := rec.Set(rev)
			if !ok || len(cs.Changes) != 1 || cs.Changes[0].ID != strconv.Itoa(i) || cs.Changes[0].Model != "m" {
				t.Errorf("revision %d: %+v, %v", rev, cs, ok)
			}
		}
	}
	// Both see the same records.
	if ra, rb := records(t, ctx, a, ""), records(t, ctx, b, ""); !reflect.DeepEqual(ra, rb) {
		t.Errorf("peers differ: %d and %d records", len(ra), len(rb))
	}
}

// testPeerConflicts: read-modify-writes through two stores lose nothing.
func testPeerConflicts(t *testing.T, s Suite) {
	a, _ := s.open(t)
	b, _ := s.peer(t, a)
	ctx := s.ctx(t)
	const workers, each = 4, 20
	var wg sync.WaitGroup
	for w := range workers {
		st := []store.Store{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := st.Update(ctx, func(tx store.Txn) error {
					if rand.IntN(2) == 0 {
						// Read through a scan sometimes.
						if _, err := scanAll(tx, "counter/", 0); err != nil {
							return err
						}
					}
					return increment(tx, "counter/shared")
				}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := a.WaitApplied(ctx, b.Revision()); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, ctx, a, "counter/shared"); v != strconv.Itoa(workers*each) {
		t.Errorf("counter = %s, want %d", v, workers*each)
	}
}

// testPeerEphemeral: another process sees an ephemeral key come and go,
// by release and by Close.
func testPeerEphemeral(t *testing.T, s Suite) {
	a, _ := s.open(t)
	b, recB := s.peer(t, a)
	ctx := s.ctx(t)
	wait := func(id, field string) {
		t.Helper()
		if err := recB.WaitFor(ctx, func(sets []watcher.ChangeSet, _ []uint64) bool {
			_, ok := findChange(sets, "apiaddr", id, field)
			return ok
		}); err != nil {
			t.Fatalf("peer saw no %s change of %s", field, id)
		}
	}
	release, err := a.Ephemeral(ctx, "apiaddr/x", []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	wait("x", watcher.FieldCreated)
	if v, ok := get(t, ctx, b, "apiaddr/x"); !ok || v != "x" {
		t.Errorf("peer reads %q, %v", v, ok)
	}
	release()
	wait("x", watcher.FieldRemoved)
	if _, err := a.Ephemeral(ctx, "apiaddr/y", []byte("y")); err != nil {
		t.Fatal(err)
	}
	wait("y", watcher.FieldCreated)
	a.Close()
	wait("y", watcher.FieldRemoved)
	if _, ok := get(t, ctx, b, "apiaddr/y"); ok {
		t.Error("a closed store's ephemeral key is still there")
	}
}

// testPeerElect: leadership passes between processes on resign and Close.
func testPeerElect(t *testing.T, s Suite) {
	a, _ := s.open(t)
	b, _ := s.peer(t, a)
	ctx := s.ctx(t)
	la, resignA, err := a.Elect(ctx, "timers")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		leading context.Context
		resign  func()
		err     error
	}
	elect := func(st store.Store) chan result {
		c := make(chan result, 1)
		go func() {
			l, r, err := st.Elect(ctx, "timers")
			c <- result{l, r, err}
		}()
		return c
	}
	cb := elect(b)
	resignA()
	if err := waitDone(ctx, la); err != nil {
		t.Fatal("a's leading context not cancelled")
	}
	rb := <-cb
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	// b leads; a campaigns; b's store closes: a leads.
	ca := elect(a)
	b.Close()
	if err := waitDone(ctx, rb.leading); err != nil {
		t.Fatal("b's leading context not cancelled by Close")
	}
	ra := <-ca
	if ra.err != nil {
		t.Fatal(ra.err)
	}
	if ra.leading.Err() != nil {
		t.Error("a's new leadership already over")
	}
	ra.resign()
}
