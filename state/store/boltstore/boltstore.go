package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/provisiond/provisiond/watcher"
)

// SchemaVersion is the layout version this build writes. A file with an
// older version is migrated on Open; a newer one is refused.
const SchemaVersion = 1

// DefaultLockTimeout is how long Open waits for the file lock.
const DefaultLockTimeout = time.Second

// maxBatch bounds the number of Update functions in one bbolt transaction,
// so one commit's dirty pages and its callers' latency stay bounded.
const maxBatch = 1024

const (
	metaBucket       = "meta"
	keySchemaVersion = "schema-version"
	keyRevision      = "revision"
)

var (
	// ErrClosed is returned by Update and View once Close has been called.
	ErrClosed = errors.New("boltstore: closed")

	// ErrLocked is returned by Open when another process (or another DB in
	// this process) holds the file lock.
	ErrLocked = errors.New("data dir is in use by another process")

	// ErrNewerSchema is returned by Open for a file written by a newer
	// provisiond.
	ErrNewerSchema = errors.New("data file has a newer schema version")
)

// Committed is one successful Update function: its revision and the
// changes it recorded.
type Committed struct {
	Rev     uint64
	Changes []watcher.Change
}

// Options configures Open. The zero value is usable.
type Options struct {
	// Buckets are created, if missing, when the file is opened. Writes to
	// a bucket not listed here fail.
	Buckets []string

	// LockTimeout is how long to wait for the file lock; zero means
	// DefaultLockTimeout.
	LockTimeout time.Duration

	// InitialMmapSize is the initial size of bbolt's memory map. While the
	// file fits in it, read transactions never hold up a commit.
	InitialMmapSize int

	// OnCommit, if set, is called after each commit is on disk and before
	// any caller of that batch is answered, with the batch's functions in
	// revision order, by the goroutine that committed (the committer, or a
	// lone writer committing its own function); calls never overlap.
	// Batches are delivered in commit order. It must not call Update (that
	// would deadlock) and should return quickly: the next commit waits for
	// it.
	OnCommit func(batch []Committed)

	// Derive, if set, rebuilds data derived from the records (indexes) in
	// the transaction that opens the file, after any migration: the file
	// is not served until it returns. Its writes record no changes and do
	// not move the revision, so an index is right whichever build wrote
	// the records last (an older build does not maintain it).
	Derive func(w *WriteTx) error

	// ObserveCommit, if set, is called after each successful commit with
	// the time the bbolt transaction took (including fsync) and the number
	// of Update functions it committed.
	ObserveCommit func(d time.Duration, fns int)
}

// DB is an open data file. It is safe for concurrent use.
type DB struct {
	bolt *bolt.DB
	opts Options
	path string

	rev atomic.Uint64 // last committed revision

	// commit commits a bbolt transaction; tests replace it to inject
	// commit failures.
	commit func(*bolt.Tx) error

	mu       sync.Mutex // guards closed, queue and busy
	closed   bool
	queue    []*request
	busy     bool          // a batch is being committed (by the committer or inline)
	lone     bool          // the last commit was of one function (see Update)
	wake     chan struct{} // capacity 1: "the queue is not empty", or "no longer busy"
	stop     chan struct{} // closed by Close
	done     chan struct{} // closed when the committer has returned
	closeMu  sync.Mutex    // serialises Close
	closeErr error
}

// request is one Update call.
type request struct {
	fn func(*WriteTx) error
	// reply (capacity 1) carries the result to a caller waiting for the
	// committer goroutine; it is nil for a request its own caller commits
	// (Update's fast path), whose result is left in res.
	reply chan result
	res   result
}

// answer gives req its result.
func (req *request) answer(r result) {
	if req.reply == nil {
		req.res = r
		return
	}
	req.reply <- r
}

type result struct {
	rev     uint64
	changes []watcher.Change
	err     error
}

// Open opens (creating if needed) the data file at path, takes its lock,
// checks or migrates its schema, creates the buckets and starts the
// committer.
func Open(path string, opts Options) (*DB, error) {
	bo := boltOptions(opts)
	bdb, err := bolt.Open(path, 0o600, bo)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: %w (no file lock after %s; is another provisiond running on this data dir?)",
			path, ErrLocked, bo.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	var rev uint64
	err = bdb.Update(func(tx *bolt.Tx) error {
		var err error
		rev, err = initFile(tx, opts.Buckets, SchemaVersion, migrations)
		if err != nil || opts.Derive == nil {
			return err
		}
		w := &WriteTx{ReadTx: ReadTx{tx: tx}, rev: rev}
		if err := opts.Derive(w); err != nil {
			return fmt.Errorf("rebuilding derived data: %w", err)
		}
		if len(w.changes) > 0 {
			return errors.New("rebuilding derived data: Derive recorded changes")
		}
		return nil
	})
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return start(bdb, path, opts, rev), nil
}

// StateMmapSize is the initial memory map size state opens its file with:
// it keeps bbolt from remapping (and so from making the committer wait for
// readers) until the file outgrows it. It reserves address space, not
// memory or disk. The raw baseline (OpenRaw) uses it too.
const StateMmapSize = 256 << 20

// boltOptions are the bbolt options of every file this package opens,
// RawFile's included, so the baseline and the daemon run the same bbolt.
//
// NoFreelistSync, as etcd: a commit writes its dirty pages and the meta
// page, not also the freelist (one page more per commit on a small file,
// more on a large one with many free pages; about 20 µs of a 300-400 µs
// durable commit on the project's machine). The freelist is rebuilt on open
// by walking the tree instead (about 45 ms for a 200 MB file). Durability
// does not change: the freelist is derived data, the pages and the meta
// that points at them are fsynced as before, and bbolt without the option
// opens such a file (it writes a freelist at its first commit).
func boltOptions(opts Options) *bolt.Options {
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	return &bolt.Options{
		Timeout:         timeout,
		InitialMmapSize: opts.InitialMmapSize,
		FreelistType:    bolt.FreelistMapType,
		NoFreelistSync:  true,
	}
}

// start wraps an open bbolt file at revision rev and starts its committer.
func start(bdb *bolt.DB, path string, opts Options, rev uint64) *DB {
	d := &DB{
		bolt:   bdb,
		opts:   opts,
		path:   path,
		commit: (*bolt.Tx).Commit,
		wake:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		lone:   true,
	}
	d.rev.Store(rev)
	go d.run()
	return d
}

// migration upgrades the file from one schema version to the next.
type migration func(tx *bolt.Tx) error

// migrations[v-1] upgrades a version v file to version v+1, so there are
// SchemaVersion-1 of them. Version 1 is the first layout: none yet.
var migrations []migration

// initFile stamps a new file with version target, or checks an existing one
// and migrates it to target with steps (steps[v-1] upgrades v to v+1), then
// creates the buckets. It returns the stored revision.
func initFile(tx *bolt.Tx, buckets []string, target uint64, steps []migration) (uint64, error) {
	meta := tx.Bucket([]byte(metaBucket))
	if meta == nil {
		// A new file: stamp it with the current layout.
		var err error
		if meta, err = tx.CreateBucket([]byte(metaBucket)); err != nil {
			return 0, err
		}
		if err := meta.Put([]byte(keySchemaVersion), u64(target)); err != nil {
			return 0, err
		}
		if err := meta.Put([]byte(keyRevision), u64(0)); err != nil {
			return 0, err
		}
	}
	v, ok := decodeU64(meta.Get([]byte(keySchemaVersion)))
	if !ok || v == 0 {
		return 0, fmt.Errorf("meta bucket has no valid %s", keySchemaVersion)
	}
	if v > target {
		return 0, fmt.Errorf("%w: the file has version %d, this build supports up to %d; use a newer provisiond",
			ErrNewerSchema, v, target)
	}
	for ; v < target; v++ {
		if int(v) > len(steps) {
			return 0, fmt.Errorf("no migration from schema version %d to %d", v, v+1)
		}
		if err := steps[v-1](tx); err != nil {
			return 0, fmt.Errorf("migrating schema from version %d to %d: %w", v, v+1, err)
		}
		if err := meta.Put([]byte(keySchemaVersion), u64(v+1)); err != nil {
			return 0, err
		}
	}
	for _, name := range buckets {
		if name == metaBucket {
			return 0, fmt.Errorf("bucket name %q is reserved", name)
		}
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return 0, fmt.Errorf("creating bucket %q: %w", name, err)
		}
	}
	rev, ok := decodeU64(meta.Get([]byte(keyRevision)))
	if !ok {
		return 0, fmt.Errorf("meta bucket has no valid %s", keyRevision)
	}
	return rev, nil
}

// Path returns the file name given to Open.
func (d *DB) Path() string { return d.path }

// Revision returns the last committed revision.
func (d *DB) Revision() uint64 { return d.rev.Load() }

// View runs fn in a read-only transaction of the last committed state.
func (d *DB) View(fn func(*ReadTx) error) error {
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return ErrClosed
	}
	// A View racing with Close may still reach bbolt after it closed;
	// bbolt then reports ErrDatabaseNotOpen, which we translate.
	err := d.bolt.View(func(tx *bolt.Tx) error { return fn(&ReadTx{tx: tx}) })
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// Update runs fn in a write transaction, possibly together with other
// callers' functions (group commit), and returns once the result is on
// disk. On success it returns the revision fn was committed at and the
// changes fn recorded. fn may be run more than once (when another function
// of its batch fails), so it must act only through tx; see the package
// documentation. Calling Update from fn or from OnCommit deadlocks.
//
// A lone writer (nothing being committed, nothing queued) commits on its
// own goroutine, as bbolt's Update would: handing its function to the
// committer goroutine and its result back would cost two goroutine
// wake-ups per write and gain nothing, since there is nobody to group it
// with. Writers that arrive meanwhile queue for the committer goroutine,
// which runs once the inline commit is done. Only after a commit of one
// function, though: under load (the last commit grouped several) every
// writer queues, so the committer goes from batch to batch without having
// to be woken and scheduled again after each inline commit.
func (d *DB) Update(fn func(*WriteTx) error) (rev uint64, changes []watcher.Change, err error) {
	req := &request{fn: fn}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return 0, nil, ErrClosed
	}
	if !d.busy && len(d.queue) == 0 && d.lone && inlineCommits() {
		d.busy = true
		d.mu.Unlock()
		d.commitInline(req)
		d.release(1)
		return req.res.rev, req.res.changes, req.res.err
	}
	req.reply = make(chan result, 1)
	d.queue = append(d.queue, req)
	d.mu.Unlock()
	d.kick()
	r := <-req.reply
	return r.rev, r.changes, r.err
}

// commitInline commits a lone writer's request on its own goroutine. A
// panic outside the update function (which call already turns into an
// error) comes from OnCommit, ObserveCommit or bbolt; on the committer
// goroutine it ends the process, and it must here too: recovered by a
// caller (rpc turns a handler's panic into an error reply) it would leave
// the DB busy, and every later write waiting, for ever.
func (d *DB) commitInline(req *request) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			go panic(fmt.Sprintf("boltstore: commit panicked: %v\n\n%s", r, stack))
			select {} // the panicking goroutine ends the process
		}
	}()
	d.commitBatch([]*request{req})
}

// inlineCommits reports whether a lone writer may commit on its own
// goroutine. The crashbug build's planted early reply answers through the
// committer goroutine's reply channels, so it commits everything there.
func inlineCommits() bool { return plantedEarlyReply == nil }

// kick wakes the committer goroutine if it is waiting.
func (d *DB) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// release ends a commit of n functions: whoever committed (the committer
// goroutine or an inline writer) is no longer busy. After an inline commit
// it wakes the committer for the writers that queued meanwhile, or for a
// Close waiting to drain.
func (d *DB) release(n int) {
	d.mu.Lock()
	d.busy = false
	d.lone = n == 1
	pending := len(d.queue) > 0 || d.closed
	d.mu.Unlock()
	if pending {
		d.kick()
	}
}

// Close stops accepting updates, commits those already queued, stops the
// committer and closes the file. It is idempotent.
func (d *DB) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return d.closeErr
	}
	d.closed = true
	d.mu.Unlock()
	close(d.stop)
	<-d.done
	if err := d.bolt.Close(); err != nil {
		d.closeErr = fmt.Errorf("boltstore: close %s: %w", d.path, err)
	}
	return d.closeErr
}

// Check runs bbolt's consistency check over the whole file and returns
// every problem found, joined.
func (d *DB) Check() error {
	var errs []error
	err := d.View(func(tx *ReadTx) error {
		for err := range tx.tx.Check() {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("boltstore: check %s: %w", d.path, errors.Join(errs...))
	}
	return nil
}

// Snapshot writes a consistent copy of the whole database, as of the last
// committed revision, to w, and returns the bytes written. It runs in a read
// transaction, so writers carry on meanwhile. size is called first with the
// snapshot's exact size (for progress reporting); it may be nil.
func (d *DB) Snapshot(w io.Writer, size func(int64)) (int64, error) {
	var n int64
	err := d.View(func(tx *ReadTx) error {
		if size != nil {
			size(tx.tx.Size())
		}
		var err error
		n, err = tx.tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("boltstore: snapshot %s: %w", d.path, err)
	}
	return n, nil
}

// run is the committer goroutine: it commits what queued while another
// commit was in progress.
func (d *DB) run() {
	defer close(d.done)
	stop := d.stop
	for {
		batch, busy := d.take()
		if len(batch) > 0 {
			d.commitBatch(batch)
			d.release(len(batch))
			continue
		}
		if stop == nil && !busy {
			// Close set closed before closing stop, so the queue can no
			// longer grow and no inline commit can start: drained.
			return
		}
		select {
		case <-d.wake:
		case <-stop:
			stop = nil // drain, then return
		}
	}
}

// take removes up to maxBatch queued requests, oldest first, and marks the
// DB busy, unless a commit is already in progress (busy is then true and
// the batch empty: the inline committer kicks the committer when done).
func (d *DB) take() (batch []*request, busy bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy {
		return nil, true
	}
	n := min(len(d.queue), maxBatch)
	if n == 0 {
		return nil, false
	}
	batch = d.queue[:n:n]
	if n == len(d.queue) {
		d.queue = nil
	} else {
		d.queue = d.queue[n:]
	}
	d.busy = true
	return batch, true
}

// commitBatch commits batch in one bbolt transaction, dropping (and
// answering) each function that fails, and answers everyone.
func (d *DB) commitBatch(batch []*request) {
	for len(batch) > 0 {
		start := time.Now()
		committed, failed, ferr, err := d.try(batch)
		if failed >= 0 {
			batch[failed].answer(result{err: ferr})
			batch = append(batch[:failed:failed], batch[failed+1:]...)
			continue
		}
		if err != nil {
			for _, req := range batch {
				req.answer(result{err: err})
			}
			return
		}
		d.rev.Store(committed[len(committed)-1].Rev)
		if d.opts.ObserveCommit != nil {
			d.opts.ObserveCommit(time.Since(start), len(committed))
		}
		if d.opts.OnCommit != nil {
			d.opts.OnCommit(committed)
		}
		for i, req := range batch {
			req.answer(result{rev: committed[i].Rev, changes: committed[i].Changes})
		}
		return
	}
}

// try runs batch in one bbolt read-write transaction and commits it. If
// function i fails it rolls back and returns failed == i with its error;
// otherwise failed is -1 and err is the error of beginning or committing
// the transaction, if any.
func (d *DB) try(batch []*request) (committed []Committed, failed int, ferr, err error) {
	tx, err := d.bolt.Begin(true)
	if err != nil {
		return nil, -1, nil, fmt.Errorf("boltstore: begin: %w", err)
	}
	meta := tx.Bucket([]byte(metaBucket))
	rev, _ := decodeU64(meta.Get([]byte(keyRevision)))
	committed = make([]Committed, 0, len(batch))
	for i, req := range batch {
		wtx := &WriteTx{ReadTx: ReadTx{tx: tx}, rev: rev + 1}
		if err := call(req.fn, wtx); err != nil {
			_ = tx.Rollback()
			return nil, i, err, nil
		}
		wtx.tx = nil // any later use by a retained WriteTx fails loudly
		rev++
		committed = append(committed, Committed{Rev: rev, Changes: wtx.changes})
	}
	if err := meta.Put([]byte(keyRevision), u64(rev)); err != nil {
		_ = tx.Rollback()
		return nil, -1, nil, fmt.Errorf("boltstore: storing revision: %w", err)
	}
	if plantedEarlyReply != nil { // nil unless built with -tags crashbug
		plantedEarlyReply(batch, committed)
	}
	if err := d.commit(tx); err != nil {
		// A failed Commit has already rolled back.
		return nil, -1, nil, fmt.Errorf("boltstore: commit: %w", err)
	}
	return committed, -1, nil, nil
}

// PanicError is the error an Update returns when its function panicked.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the stack of the panicking goroutine
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("boltstore: update function panicked: %v", e.Value)
}

// call runs fn, turning a panic into a *PanicError.
func call(fn func(*WriteTx) error, tx *WriteTx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(tx)
}

// ReadTx is a read-only view of one revision. It is valid only inside the
// function it is passed to.
type ReadTx struct {
	tx *bolt.Tx
}

// Get returns a copy of the value stored under key in bucket.
func (r *ReadTx) Get(bucket, key string) ([]byte, bool) {
	b := r.tx.Bucket([]byte(bucket))
	if b == nil {
		return nil, false
	}
	v := b.Get([]byte(key))
	if v == nil {
		return nil, false
	}
	return bytes.Clone(v), true
}

// GetFunc calls fn with the value stored under key in bucket, if there is
// one, and reports whether there was. Unlike Get it does not copy: val
// points into bbolt's read-only memory map and is valid only until fn
// returns, so fn must neither keep nor modify it (copy what it keeps). It
// saves a read that only compares or decodes the value an allocation.
func (r *ReadTx) GetFunc(bucket, key string, fn func(val []byte)) bool {
	b := r.tx.Bucket([]byte(bucket))
	if b == nil {
		return false
	}
	v := b.Get([]byte(key))
	if v == nil {
		return false
	}
	fn(v)
	return true
}

// ForEachPrefix calls fn, in key order, for every key in bucket that starts
// with prefix (every key when prefix is empty). val is a copy. An error
// from fn stops the iteration and is returned.
func (r *ReadTx) ForEachPrefix(bucket, prefix string, fn func(key string, val []byte) error) error {
	b := r.tx.Bucket([]byte(bucket))
	if b == nil {
		return fmt.Errorf("boltstore: unknown bucket %q", bucket)
	}
	c := b.Cursor()
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if v == nil {
			continue // a nested bucket; we do not make any
		}
		if err := fn(string(k), bytes.Clone(v)); err != nil {
			return err
		}
	}
	return nil
}

// Revision returns the revision this transaction reads.
func (r *ReadTx) Revision() uint64 {
	rev, _ := decodeU64(r.tx.Bucket([]byte(metaBucket)).Get([]byte(keyRevision)))
	return rev
}

// WriteTx is one Update function's view of the write transaction: the
// writes of the functions committed before it in the same batch are
// visible. It is valid only inside that function.
type WriteTx struct {
	ReadTx
	rev     uint64
	changes []watcher.Change
}

// Revision returns the revision this function's writes will be committed
// at, so records can carry it (like etcd's mod_revision).
func (w *WriteTx) Revision() uint64 { return w.rev }

// Put stores a copy of val under key in bucket.
func (w *WriteTx) Put(bucket, key string, val []byte) error {
	b, err := w.bucket(bucket)
	if err != nil {
		return err
	}
	if val == nil {
		val = []byte{} // bbolt treats a nil value as a bucket marker
	}
	if err := b.Put([]byte(key), bytes.Clone(val)); err != nil {
		return fmt.Errorf("boltstore: put %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Delete removes key from bucket. Deleting a missing key is not an error.
func (w *WriteTx) Delete(bucket, key string) error {
	b, err := w.bucket(bucket)
	if err != nil {
		return err
	}
	if err := b.Delete([]byte(key)); err != nil {
		return fmt.Errorf("boltstore: delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// Record adds c to the change set of this function's revision.
func (w *WriteTx) Record(c watcher.Change) { w.changes = append(w.changes, c) }

func (w *WriteTx) bucket(name string) (*bolt.Bucket, error) {
	if name == metaBucket || strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("boltstore: bucket %q is not writable", name)
	}
	b := w.tx.Bucket([]byte(name))
	if b == nil {
		return nil, fmt.Errorf("boltstore: unknown bucket %q", name)
	}
	return b, nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeU64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}
