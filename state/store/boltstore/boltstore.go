package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/provisiond/provisiond/state/internal/failpoint"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// DefaultLockTimeout is how long Open waits for the file lock.
const DefaultLockTimeout = time.Second

// DefaultRetention is how many revisions of change sets the file keeps
// (Options.Retention).
const DefaultRetention = 10_000

// DefaultStuckAfter is how long a commit may run before Health reports the
// store unhealthy (Options.StuckAfter).
const DefaultStuckAfter = 10 * time.Second

// MmapSize is the initial memory map size state opens its file with: it
// keeps bbolt from remapping (and so from making the committer wait for
// readers) until the file outgrows it. It reserves address space, not
// memory or disk. The raw baseline (package rawbolt) uses it too.
const MmapSize = 256 << 20

// maxArena is the largest arena (Store.arena) kept from one commit to
// the next.
const maxArena = 64 << 10

// maxBatch bounds the number of Update functions in one bbolt transaction,
// so one commit's dirty pages and its callers' latency stay bounded.
const maxBatch = 1024

var (
	// ErrLocked is returned by Open when another process (or another Store
	// in this process) holds the file lock.
	ErrLocked = errors.New("data dir is in use by another process")

	// ErrNewerSchema is returned by Open for a file written by a newer
	// provisiond.
	ErrNewerSchema = errors.New("data file has a newer schema version")

	// ErrReadOnly is returned by the writes of a store opened with
	// OpenReadOnly.
	ErrReadOnly = errors.New("boltstore: opened read-only")
)

// Options configures Open. The zero value is usable.
type Options struct {
	// Feed receives every committed change set (see store.Feed).
	Feed store.Feed

	// LockTimeout is how long to wait for the file lock; zero means
	// DefaultLockTimeout.
	LockTimeout time.Duration

	// InitialMmapSize is the initial size of bbolt's memory map. While the
	// file fits in it, read transactions never hold up a commit.
	InitialMmapSize int

	// PreloadFreelist (OpenReadOnly) builds bbolt's list of free pages as
	// the file opens, on the caller's goroutine: a walk of every page
	// reachable, which Check would otherwise make first on a goroutine
	// of bbolt's. A damaged page then panics the caller, not that
	// goroutine, whose panic closes Check's channel on its way (so Check
	// would return nil) while the process is still dying: a child checking
	// a file could print "ok" and exit 0 before the panic ended it.
	PreloadFreelist bool

	// Retention is how many revisions of change sets are kept at least
	// (older ones are pruned pruneChunk at a time); zero means
	// DefaultRetention.
	Retention uint64

	// StuckAfter is how long a commit may take before Health reports the
	// store unhealthy; zero means DefaultStuckAfter.
	StuckAfter time.Duration

	// ObserveCommit, if set, is called after each successful commit with
	// the time the bbolt transaction took (including fsync) and the number
	// of Update functions it committed (those that wrote something).
	ObserveCommit func(d time.Duration, fns int)

	// Failed, if set, is called once if the store fails for good (its file
	// removed, replaced or truncated under it, or reading it faulted: see
	// fault.go), with why and, when the file was removed or replaced,
	// where what it held was copied (RescuePath). It is called on the
	// goroutine that found the failure and must neither block nor call
	// the store.
	Failed func(error)
}

// Store is an open data file: a store.Store. It is safe for concurrent use.
type Store struct {
	bolt     *bolt.DB
	opts     Options
	path     string
	readOnly bool

	// rev is the last committed revision. A commit is applied (its change
	// sets handed to Feed.Apply) before rev moves, so it is also the last
	// applied one.
	rev atomic.Uint64

	// commit commits a bbolt transaction; tests replace it to inject
	// commit failures.
	commit func(*bolt.Tx) error

	mu      sync.Mutex // guards the fields below, up to closeMu
	closing bool       // Close has begun: no new ephemeral keys
	closed  bool       // no more Updates
	queue   []*request
	busy    bool          // a batch is being committed (by the committer, inline, or Load)
	lone    bool          // the last commit was of one function (see Update)
	wake    chan struct{} // capacity 1: "the queue is not empty", or "no longer busy"
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the committer has returned

	closeMu  sync.Mutex // serialises Close
	closeErr error

	// oldestChange is the oldest revision with a stored change set (0:
	// none); only the goroutine committing (one at a time) touches it.
	oldestChange uint64
	// arena holds the values a commit gives bbolt that it builds (the
	// history records): bbolt reads them until the commit ends, so the
	// next commit may reuse it. histPending lists the batch's records in
	// it, and stageBytes is what meta/histstage holds (-1: not known;
	// history.go). All three are the committing goroutine's, as
	// oldestChange.
	arena       []byte
	histPending []pendingRecord
	stageBytes  int

	appliedMu sync.Mutex    // guards appliedCh
	appliedCh chan struct{} // closed and replaced when rev moves while waiters > 0 (WaitApplied)
	waiters   atomic.Int32  // WaitApplied calls under way

	commitStart atomic.Int64          // UnixNano when the commit in progress began; 0 when none
	lastErr     atomic.Pointer[error] // the last commit's error; nil after a success

	// file is the file Open opened, and minSize how long it must be at
	// least (where the pages of its last commit reach); failed is set,
	// once, when the store fails for good (fault.go); txLeaked says a
	// write transaction could not be rolled back after a fault, so
	// bbolt's writer lock stays taken and Close must not wait for it.
	file     os.FileInfo
	minSize  atomic.Int64
	failed   atomic.Pointer[failure]
	txLeaked atomic.Bool

	ephMu     sync.Mutex // guards ephemeral
	ephemeral map[string]*ephemeralKey

	electMu   sync.Mutex // guards elections
	elections map[string]chan struct{}

	// life is cancelled by Close: the leading contexts of Elect derive
	// from it.
	life       context.Context
	cancelLife context.CancelFunc
}

var _ store.Store = (*Store)(nil)
var _ store.Dumper = (*Store)(nil)
var _ store.Loader = (*Store)(nil)

// request is one Update call.
type request struct {
	ctx context.Context
	fn  func(*txn) error
	// state is reqQueued until the committer takes the function to run
	// (reqRunning) or its caller gives up waiting first (reqAbandoned);
	// ran is done once the committer has run the function or passed it
	// by, so a caller whose ctx ends while it runs waits for it (the
	// function writes its caller's memory) and no longer.
	state atomic.Int32
	ran   sync.WaitGroup
	// reply (capacity 1) carries the result to a caller waiting for the
	// committer goroutine; it is nil for a request its own caller commits
	// (Update's fast path), whose result is left in res.
	reply chan result
	res   result
}

// A request's states (request.state).
const (
	reqQueued int32 = iota
	reqRunning
	reqAbandoned
)

// answer gives req its result.
func (req *request) answer(r result) {
	if req.reply == nil {
		req.res = r
		return
	}
	req.reply <- r
}

type result struct {
	rev uint64
	err error
}

// Open opens (creating if needed) the data file at path, takes its lock,
// checks or migrates its layout, removes the ephemeral keys a previous
// process left and starts the committer.
//
// Opening reads every page (bbolt rebuilds its free list: NoFreelistSync),
// so a file truncated since it was written faults: that is an error
// wrapping ErrFailed, not a crash (fault.go); the file and its lock are
// then held until the process exits.
func Open(path string, opts Options) (*Store, error) {
	bo := BoltOptions(opts.LockTimeout, opts.InitialMmapSize)
	var bdb *bolt.DB
	err := func() (err error) {
		defer (*Store)(nil).recoverFault(&err, debug.SetPanicOnFault(true))
		bdb, err = bolt.Open(path, 0o600, bo)
		return err
	}()
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("boltstore: open %s: %w (no file lock after %s; is another provisiond running on this data dir?)",
			path, ErrLocked, bo.Timeout)
	}
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	var rev, oldest uint64
	var size int64
	err = func() (err error) {
		defer (*Store)(nil).recoverFault(&err, debug.SetPanicOnFault(true))
		return bdb.Update(func(tx *bolt.Tx) error {
			var err error
			if rev, err = initFile(tx, SchemaVersion, migrations); err != nil {
				return err
			}
			if rev, err = dropEphemeral(tx, rev); err != nil {
				return err
			}
			oldest = oldestChange(tx)
			size = tx.Size()
			return nil
		})
	}()
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Stat(path)
	}
	if err != nil {
		if !errors.Is(err, ErrFailed) { // after a fault bbolt's writer lock may be taken
			_ = bdb.Close()
		}
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := start(bdb, path, opts, rev, false, fi, size)
	s.oldestChange = oldest
	s.stageBytes = -1
	return s, nil
}

// BoltOptions are the bbolt options of every file this package opens, and
// of the raw baseline (package rawbolt), so the baseline and the daemon run
// the same bbolt. lockTimeout <= 0 means DefaultLockTimeout.
//
// NoFreelistSync, as etcd: a commit writes its dirty pages and the meta
// page, not also the freelist (one page more per commit on a small file,
// more on a large one with many free pages; about 20 µs of a 300-400 µs
// durable commit on the project's machine). The freelist is rebuilt on open
// by walking the tree instead (about 45 ms for a 200 MB file). Durability
// does not change: the freelist is derived data, the pages and the meta
// that points at them are fsynced as before, and bbolt without the option
// opens such a file (it writes a freelist at its first commit).
func BoltOptions(lockTimeout time.Duration, mmapSize int) *bolt.Options {
	if lockTimeout <= 0 {
		lockTimeout = DefaultLockTimeout
	}
	return &bolt.Options{
		Timeout:         lockTimeout,
		InitialMmapSize: mmapSize,
		FreelistType:    bolt.FreelistMapType,
		NoFreelistSync:  true,
	}
}

// start wraps an open bbolt file at revision rev, whose file is fi and
// reaches size bytes, and starts its committer.
func start(bdb *bolt.DB, path string, opts Options, rev uint64, readOnly bool, fi os.FileInfo, size int64) *Store {
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	s := &Store{
		bolt:      bdb,
		opts:      opts,
		path:      path,
		readOnly:  readOnly,
		file:      fi,
		commit:    (*bolt.Tx).Commit,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		lone:      true,
		appliedCh: make(chan struct{}),
		ephemeral: map[string]*ephemeralKey{},
		elections: map[string]chan struct{}{},
	}
	s.life, s.cancelLife = context.WithCancel(context.Background())
	s.rev.Store(rev)
	s.minSize.Store(size)
	go s.run()
	return s
}

// Path returns the file name given to Open.
func (s *Store) Path() string { return s.path }

// Revision returns the last committed (and applied) revision.
func (s *Store) Revision() uint64 { return s.rev.Load() }

// Info describes the store.
func (s *Store) Info() store.Info {
	return store.Info{Engine: "bbolt", Location: s.path, Revision: s.Revision()}
}

// View runs fn in a bbolt read-only transaction of the last committed
// revision, on the calling goroutine.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.viewBolt(func(tx *bolt.Tx) error { return fn(&reader{btx: tx}) })
}

var errClosed = fmt.Errorf("boltstore: %w", store.ErrClosed)

// errDatabaseNotOpen is what bbolt returns to a View racing with Close
// after the file closed; viewBolt translates it.
var errDatabaseNotOpen = berrors.ErrDatabaseNotOpen

// Update runs fn as one transaction (see store.Store), possibly in one
// bbolt transaction with other callers' functions (group commit), and
// returns once the commit is on disk and its change set applied. Each
// function has its own write set: one that fails or writes nothing is left
// out of the commit and costs the others nothing. Functions of one batch
// run one after another, each seeing the writes of those before it, so a
// function runs exactly once and never conflicts. fn must act only through
// its Txn; calling Update from fn or from Feed.Apply deadlocks.
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
//
// ctx bounds the wait: a caller whose ctx ends while its function is
// queued gets ctx's error and its function is not run; one whose ctx ends
// while its function runs gets it once the function has returned; one
// whose ctx ends while its batch commits gets ctx's error too, and the
// commit may still happen (as with any store whose commit cannot be
// recalled). Update never returns while fn runs.
func (s *Store) Update(ctx context.Context, fn func(store.Txn) error) (uint64, error) {
	return s.update(ctx, func(t *txn) error { return fn(t) })
}

// update is Update for functions of this package, which may also write the
// store's own keys (txn.metaPut).
func (s *Store) update(ctx context.Context, fn func(*txn) error) (uint64, error) {
	if s.readOnly {
		return 0, ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := s.usable(); err != nil {
		return 0, err
	}
	req := &request{ctx: ctx, fn: fn}
	req.ran.Add(1) // done by commitBatch as it runs the function or passes it by
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, errClosed
	}
	if !s.busy && len(s.queue) == 0 && s.lone && inlineCommits() {
		s.busy = true
		s.mu.Unlock()
		s.commitInline(req)
		s.release(1)
		return req.res.rev, req.res.err
	}
	req.reply = make(chan result, 1)
	s.queue = append(s.queue, req)
	s.mu.Unlock()
	s.kick()
	select {
	case r := <-req.reply:
		return r.rev, r.err
	case <-ctx.Done():
		if !req.state.CompareAndSwap(reqQueued, reqAbandoned) {
			req.ran.Wait() // the function is running: not past its end
		}
		return 0, ctx.Err()
	}
}

// commitInline commits a lone writer's request on its own goroutine. A
// panic outside the update function (which call already turns into an
// error) comes from Feed.Apply, ObserveCommit or bbolt; on the committer
// goroutine it ends the process, and it must here too: recovered by a
// caller (rpc turns a handler's panic into an error reply) it would leave
// the store busy, and every later write waiting, for ever.
func (s *Store) commitInline(req *request) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			go panic(fmt.Sprintf("boltstore: commit panicked: %v\n\n%s", r, stack))
			select {} // the panicking goroutine ends the process
		}
	}()
	s.commitBatch([]*request{req})
}

// inlineCommits reports whether a lone writer may commit on its own
// goroutine. The crashbug build's planted early reply answers through the
// committer goroutine's reply channels, so it commits everything there.
func inlineCommits() bool { return !plantedBug }

// kick wakes the committer goroutine if it is waiting.
func (s *Store) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// release ends a commit of n functions: whoever committed (the committer
// goroutine, an inline writer or Load) is no longer busy. Afterwards it
// wakes the committer for the writers that queued meanwhile, or for a
// Close waiting to drain.
func (s *Store) release(n int) {
	s.mu.Lock()
	s.busy = false
	s.lone = n == 1
	pending := len(s.queue) > 0 || s.closed
	s.mu.Unlock()
	if pending {
		s.kick()
	}
}

// Close removes this process's ephemeral keys, stops accepting updates,
// commits those already queued, stops the committer and closes the file.
// Leading contexts of Elect are cancelled. It is idempotent.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closeErr
	}
	s.closing = true
	s.mu.Unlock()
	var errs []error
	if err := s.releaseAllEphemeral(); err != nil && s.usable() == nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.cancelLife()
	// After a fault bbolt's writer lock may still be taken (txLeaked):
	// the file and its memory map then go with the process.
	if !s.txLeaked.Load() {
		if err := s.bolt.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		s.closeErr = fmt.Errorf("boltstore: close %s: %w", s.path, errors.Join(errs...))
	}
	return s.closeErr
}

// run is the committer goroutine: it commits what queued while another
// commit was in progress.
func (s *Store) run() {
	defer close(s.done)
	stop := s.stop
	var check <-chan time.Time // the idle check of the file (fault.go)
	if !s.readOnly {
		t := time.NewTicker(fileCheckEvery)
		defer t.Stop()
		check = t.C
	}
	for {
		batch, busy := s.take()
		if len(batch) > 0 {
			n := s.commitBatch(batch)
			s.release(n)
			continue
		}
		if stop == nil && !busy {
			// Close set closed before closing stop, so the queue can no
			// longer grow and no inline commit can start: drained.
			return
		}
		select {
		case <-s.wake:
		case <-stop:
			stop = nil // drain, then return
		case <-check:
			_ = s.verifyFile()
		}
	}
}

// take removes up to maxBatch queued requests, oldest first, and marks the
// store busy, unless a commit is already in progress (busy is then true
// and the batch empty: whoever commits kicks the committer when done).
func (s *Store) take() (batch []*request, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy {
		return nil, true
	}
	n := min(len(s.queue), maxBatch)
	if n == 0 {
		return nil, false
	}
	batch = s.queue[:n:n]
	if n == len(s.queue) {
		s.queue = nil
	} else {
		s.queue = s.queue[n:]
	}
	s.busy = true
	return batch, true
}

// committed is one function of a batch that wrote: its revision and the
// changes it recorded.
type committed struct {
	rev     uint64
	changes []watcher.Change
}

// commitBatch runs batch in one bbolt read-write transaction, each
// function over its own write set, and commits what the functions that
// succeeded wrote. It answers every caller after the commit is on disk and
// its change sets are applied (a function that failed or wrote nothing
// read what the others of its batch wrote, so it too is answered only once
// that is durable), and returns the number of functions committed.
//
// When beginning, applying or committing the bbolt transaction fails,
// every caller of the batch gets that error (wrapping store.ErrUnavailable)
// and nothing is committed.
func (s *Store) commitBatch(batch []*request) (committedFns int) {
	start := time.Now()
	s.commitStart.Store(start.UnixNano())
	defer s.commitStart.Store(0)
	fail := func(err error) int {
		s.lastErr.Store(&err)
		for _, req := range batch {
			req.answer(result{err: err})
		}
		return 0
	}
	if err := s.usable(); err != nil {
		return fail(err)
	}
	// A fault reading the memory map (a truncated file) fails the
	// store and every caller of the batch (fault.go).
	var tx *bolt.Tx
	defer s.recoverCommitFault(batch, &tx, &committedFns, debug.SetPanicOnFault(true))
	tx, err := s.bolt.Begin(true)
	if err != nil {
		tx = nil
		return fail(fmt.Errorf("boltstore: begin: %w: %w", store.ErrUnavailable, err))
	}
	rev := s.rev.Load()
	oldest := s.oldestChange
	res := make([]result, len(batch))
	var done []committed
	arena, pending := s.arena[:0], s.histPending[:0]
	defer func() {
		if cap(arena) > maxArena {
			arena = nil // one large commit's: not kept
		}
		s.arena, s.histPending = arena, pending[:0]
	}()
	dirty := false // something to commit: a function's writes, or the store's own
	for i, req := range batch {
		if req.ctx.Err() != nil || !req.state.CompareAndSwap(reqQueued, reqRunning) {
			// Its caller has gone (abandoned only once its ctx ended): not run.
			res[i] = result{err: req.ctx.Err()}
			req.ran.Done()
			continue
		}
		t := newTxn(tx, rev)
		err := call(req.fn, t)
		req.ran.Done()
		t.done = true // any later use by a retained Txn fails
		if err != nil {
			res[i] = result{err: err} // its write set is dropped
			continue
		}
		// The record is built in the arena, and stored with the
		// batch's others once they are all built (putHistory).
		recStart := len(arena)
		arena = binary.BigEndian.AppendUint64(arena, rev+1) // its key, if it writes
		arena = store.AppendCommitHead(arena, start, store.OriginOf(req.ctx))
		wrote, meta, err := t.apply(&arena)
		recEnd := len(arena)
		if err != nil {
			_ = tx.Rollback()
			tx = nil
			return fail(err)
		}
		dirty = dirty || wrote || meta
		if meta {
			s.stageBytes = -1 // the store's own writes (pruning) may have emptied the stage
		}
		if !wrote {
			arena = arena[:recStart]
			res[i] = result{rev: rev} // nothing to commit: no revision spent
			continue
		}
		rev++
		if err := putChangeSet(tx, rev, t.changes, &arena); err != nil {
			_ = tx.Rollback()
			tx = nil
			return fail(err)
		}
		pending = append(pending, pendingRecord{rev: rev, start: recStart, end: recEnd})
		if oldest == 0 {
			oldest = rev
		}
		done = append(done, committed{rev: rev, changes: t.changes})
		res[i] = result{rev: rev}
	}
	if !dirty {
		_ = tx.Rollback()
		tx = nil
		for i, req := range batch {
			req.answer(res[i])
		}
		return 0
	}
	stageBytes := s.stageBytes
	if len(done) > 0 {
		if stageBytes, err = putHistory(tx, pending, arena, stageBytes); err != nil {
			_ = tx.Rollback()
			tx = nil
			return fail(err)
		}
		at := len(arena)
		arena = binary.BigEndian.AppendUint64(arena, rev)
		if err := tx.Bucket(metaBucket).Put(keyRevision, arena[at:len(arena):len(arena)]); err != nil {
			_ = tx.Rollback()
			tx = nil
			return fail(fmt.Errorf("boltstore: storing revision: %w: %w", store.ErrUnavailable, err))
		}
		if oldest, err = pruneChanges(tx, oldest, rev, s.opts.Retention); err != nil {
			_ = tx.Rollback()
			tx = nil
			return fail(err)
		}
	}
	if plantedBug { // a constant: false unless built with -tags crashbug
		plantEarlyReply(batch, res, s.rev.Load()+1)
	}
	// The commit goes to the file at the store's path, and is answered
	// only if it did: a file removed, replaced or truncated meanwhile
	// fails the store (fault.go).
	if err := s.verifyFile(); err != nil {
		// A truncated file's transaction is not rolled back: the
		// rollback walks its pages (see recoverCommitFault). A removed
		// or replaced file's pages are whole. tx stays set until the
		// rollback returns, so a fault in it leaves tx marked leaked.
		if f := s.failed.Load(); f != nil && f.rescue {
			_ = tx.Rollback()
		} else {
			s.txLeaked.Store(true)
		}
		tx = nil
		return fail(err)
	}
	if failpoint.Enabled {
		failpoint.Eval("store/commit")
	}
	size := tx.Size()
	err = s.commit(tx)
	tx = nil // a failed Commit has already rolled back
	if err != nil {
		return fail(fmt.Errorf("boltstore: commit: %w: %w", store.ErrUnavailable, err))
	}
	if err := s.verifyFile(); err != nil {
		return fail(err)
	}
	s.minSize.Store(size)
	s.lastErr.Store(nil)
	s.oldestChange = oldest
	s.stageBytes = stageBytes
	if s.opts.ObserveCommit != nil && len(done) > 0 {
		s.opts.ObserveCommit(time.Since(start), len(done))
	}
	if failpoint.Enabled {
		failpoint.Eval("store/reply")
	}
	if s.opts.Feed.Apply != nil {
		for _, c := range done {
			s.opts.Feed.Apply(watcher.ChangeSet{Rev: c.rev, Changes: c.changes})
		}
	}
	if len(done) > 0 {
		s.setApplied(rev)
	}
	for i, req := range batch {
		req.answer(res[i])
	}
	return len(done)
}

// setApplied moves the revision to rev and wakes WaitApplied.
func (s *Store) setApplied(rev uint64) {
	s.appliedMu.Lock()
	s.rev.Store(rev)
	if s.waiters.Load() > 0 { // else nobody holds the channel: no new one to make
		close(s.appliedCh)
		s.appliedCh = make(chan struct{})
	}
	s.appliedMu.Unlock()
}

// WaitApplied returns once revision rev is committed and applied, or ctx
// is done, or the store closed.
func (s *Store) WaitApplied(ctx context.Context, rev uint64) error {
	if s.rev.Load() >= rev {
		return nil
	}
	// Counted before the channel is read: a setApplied that then sees
	// no waiter ran (under appliedMu) before that read, so the revision
	// read after it is the new one.
	s.waiters.Add(1)
	defer s.waiters.Add(-1)
	for {
		s.appliedMu.Lock()
		ch := s.appliedCh
		s.appliedMu.Unlock()
		if s.rev.Load() >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.life.Done():
			return errClosed
		}
	}
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
func call(fn func(*txn) error, t *txn) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, fault := memoryFault(r); fault {
				panic(r) // the file's, not the function's: commitBatch fails the store
			}
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return fn(t)
}

// Health reports whether the store can commit: not closed, no commit
// running for longer than Options.StuckAfter, and the last commit not
// failed. After a failed commit, while nothing else is being committed,
// it tries a commit of its own (of the store's own bookkeeping, spending
// no revision), so a store whose disk recovered is healthy again without
// waiting for a write.
func (s *Store) Health(ctx context.Context) error {
	if s.readOnly {
		return ErrReadOnly
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errClosed
	}
	if err := s.verifyFile(); err != nil {
		return err
	}
	if t := s.commitStart.Load(); t != 0 {
		if d := time.Since(time.Unix(0, t)); d > s.opts.StuckAfter {
			return fmt.Errorf("boltstore: %w: a commit has been running for %s", store.ErrUnavailable, d.Round(time.Millisecond))
		}
	}
	if s.lastErr.Load() == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.StuckAfter)
	defer cancel()
	_, err := s.update(ctx, func(t *txn) error {
		t.metaPut(nil, keyHealthProbe, u64(uint64(time.Now().UnixNano())))
		return nil
	})
	if err != nil {
		return fmt.Errorf("boltstore: %w: the last commit failed: %w", store.ErrUnavailable, err)
	}
	return nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeU64(b []byte) (uint64, bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}
