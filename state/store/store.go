// Package store is the seam between package state and the engine that keeps
// its records: bbolt (package boltstore, the embedded default: one file, one
// process) or etcd (package etcdstore: several daemons, one controller). It
// is shaped after what both engines can promise, not after either one.
//
// # Keys and values
//
// Keys are flat strings "<kind>/<rest>": the first segment names the kind
// of record (an entity kind such as "machine", an index such as
// "idx-unit-provider", or "meta"), the rest is the record's key within it
// ("<model-uuid>/<id>" for per-model records). Kinds never contain "/";
// the rest may (machine ids do). Keys and values are arbitrary bytes held
// in Go strings and byte slices. The "meta" kind is the store's own (schema
// version, change sets, revision bookkeeping): writes to it are refused.
//
// # Reads
//
// View runs a function over a consistent, read-only view of one revision:
// the latest revision this process has applied. Values a Reader returns
// must not be modified; they stay valid after the view ends. Scans are
// bounded: each call visits at most a limit of keys and says where to go
// on, so no single read is unbounded.
//
// # Writes: one optimistic transaction per Update
//
// Update runs a function as one optimistic transaction. The function reads
// through its Txn (which sees the Txn's own writes), buffers its writes in
// the Txn and records the watcher changes they make. The store then commits
// the writes atomically, at one new revision, only if everything the
// function read is unchanged since it read it; otherwise it runs the
// function again on a newer view. So the function may run more than once:
// it must act only through its Txn (no side effects, no retained Txn or
// values). A function that returns an error commits nothing; one that
// writes nothing commits nothing and spends no revision. Either way the
// store's revision does not move.
//
// Txn.Nest runs a part of a function (one item of a bulk call) whose
// writes and changes are undone if it fails, while the rest of the
// transaction goes on: a bulk call applies its valid items in one commit.
//
// On bbolt, concurrent Updates share one bbolt transaction and one fsync
// (group commit: a lone writer is never delayed to wait for company), but
// each function has its own write set: a failed or no-op function is
// simply left out, it re-runs nobody and spends no revision. Functions of
// one batch run one after another, each seeing the writes of those
// committed before it, so on bbolt a function never conflicts. On etcd,
// the reads are validated at commit by comparing each key's mod revision,
// and concurrent Updates of one process that neither read nor write what
// the others write may share one etcd transaction (group commit): they
// commit, or not, each on its own, and those that do share its revision
// and its change set.
//
// # Revisions and the change feed
//
// The revision is the engine's: bbolt's counter (one per committed
// function), etcd's cluster revision (one per etcd transaction, which may
// carry several functions). Records do not carry revisions. Every
// commit persists its change set (the watcher.Changes its function
// recorded) in the same transaction as its writes. Each process applies
// the feed of committed change sets in revision order, starting after the
// last revision it applied, and hands each to Feed.Apply (package state
// publishes it to the watcher hub). Update returns only once the local
// process has applied its own revision: a caller that writes and then
// reads, or watches, sees its write. Revisions the engine makes without a
// change set (etcd lease expiry) reach Apply as changes the store derives
// from the keys (see Ephemeral).
//
// When the feed cannot be followed (etcd compacted past the revision the
// process applied last), the store reloads its view and calls Feed.Reset:
// every watcher must be woken, since anything may have changed. A spurious
// event is allowed; a missed one never.
package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/provisiond/provisiond/watcher"
)

// Store is an open store. It is safe for concurrent use.
type Store interface {
	// View calls fn with a read view of the latest revision this process
	// has applied. An error from fn is returned as it is.
	View(ctx context.Context, fn func(Reader) error) error

	// Update runs fn as one optimistic transaction (see the package
	// documentation) and returns once its commit is durable (bbolt fsync,
	// etcd quorum) and applied by this process. It returns the revision
	// of the commit, or, when fn wrote nothing, the revision fn read
	// (nothing was committed). An error from fn is returned as it is and
	// nothing is committed. Update never returns while fn runs, even when
	// ctx ends (fn may write its caller's memory); the commit may still
	// happen after an Update that ctx ended returned.
	Update(ctx context.Context, fn func(Txn) error) (rev uint64, err error)

	// Revision is the latest revision this process has applied.
	Revision() uint64

	// WaitApplied returns once this process has applied revision rev (its
	// change set has been handed to Feed.Apply), or ctx is done.
	WaitApplied(ctx context.Context, rev uint64) error

	// Ephemeral stores val under key for as long as this process lives
	// and holds it: on etcd under a lease the process keeps alive, so the
	// key disappears when the process dies or loses the store; on bbolt
	// until release or Close. Each put and removal (release, or the
	// lease's expiry) reaches every process's feed as a Change of kind
	// Kind(key) and id Rest(key), with watcher.FieldCreated or
	// watcher.FieldRemoved. release is idempotent. A later Ephemeral
	// of a key this process holds takes it over: its value replaces the
	// earlier one (a created change again) and the earlier release does
	// nothing.
	Ephemeral(ctx context.Context, key string, val []byte) (release func(), err error)

	// Elect blocks until this process leads the named election (or ctx is
	// done) and returns a context that is cancelled when it stops leading
	// (its lease lost, the store closed) and a function that resigns.
	// Work that must run once per controller runs under it. One caller
	// leads a name at a time, among the goroutines of one process as
	// among processes: another Elect of the name blocks until the leader
	// resigns or loses its leadership. On bbolt the only process leads as
	// soon as no goroutine of it does. resign is idempotent and returns
	// once the leadership is given up.
	Elect(ctx context.Context, name string) (leading context.Context, resign func(), err error)

	// Health reports whether the store can commit now (reachable, quorum,
	// not out of space as far as the engine can tell).
	Health(ctx context.Context) error

	// Info describes the store for operators: engine, location, revision.
	Info() Info

	// Close stops the feed, waits for Updates in progress and closes the
	// store. It is idempotent.
	Close() error
}

// Reader is a read view of one revision. It is valid only inside the
// function it is passed to.
type Reader interface {
	// Get returns the value stored under key. The value must not be
	// modified; it stays valid after the view ends.
	Get(key string) (val []byte, ok bool, err error)

	// GetFunc calls fn with the value stored under key, if any, and
	// reports whether there was one. The value is valid only while fn
	// runs (on bbolt it points into the memory map): fn must neither keep
	// nor modify it. It saves reads that only decode or compare a value a
	// copy.
	GetFunc(key string, fn func(val []byte)) (ok bool, err error)

	// Scan calls fn, in key order, for the keys that start with prefix and
	// sort after start ("" for the first), at most limit of them (limit
	// <= 0 or over MaxScan means MaxScan). It returns the last key visited
	// and whether more keys with the prefix follow it, so a caller goes
	// on with Scan(prefix, last, ...). An error from fn stops the scan and
	// is returned. Values are as Get's.
	Scan(prefix, start string, limit int, fn func(key string, val []byte) error) (last string, more bool, err error)

	// Revision is the revision this view reads.
	Revision() uint64
}

// Txn is one Update function's transaction: a Reader that sees the
// transaction's own buffered writes, and the writes themselves. It is
// valid only inside the function it is passed to.
type Txn interface {
	Reader

	// Put buffers a write of val under key (a copy of val is kept).
	Put(key string, val []byte) error

	// Delete buffers the removal of key. Deleting a missing key is not an
	// error (and, if nothing else is written, commits nothing).
	Delete(key string) error

	// Record adds c to the change set of this transaction's commit.
	Record(c watcher.Change)

	// Nest runs fn as a part of this transaction: if fn returns an error,
	// every write and change made through the Txn while it ran is undone
	// and the error returned; what fn read stays in the transaction's
	// read set. Nest calls may nest.
	Nest(fn func() error) error
}

// Feed receives the change feed of a store, in revision order, one call
// at a time: calls never overlap. A call may run on the store's own
// goroutine or on the goroutine of an Update that committed the revision
// (bbolt's lone writer, etcd's own commit), with the store's apply lock
// held.
type Feed struct {
	// Apply is called once for every revision with a change set, after it
	// is durable and before any Update of this process that committed it
	// returns. It must not call the store, nor wait for anything an
	// Update's caller may hold, and should return quickly.
	Apply func(cs watcher.ChangeSet)

	// Reset is called when the process could not follow the feed up to
	// rev (history compacted away) and has reloaded its view at rev:
	// every watcher must be woken. Apply goes on after rev.
	Reset func(rev uint64)
}

// Info describes a store for operators (provisiond check, /health,
// show-controller).
type Info struct {
	Engine   string // "bbolt" or "etcd"
	Location string // the file, or the endpoints and prefix
	Revision uint64
}

// Inspector is implemented by stores that can report more of themselves
// than Info: the figures operators read (provisionctl show-controller and
// version, /metrics, provisiond check, backup's manifest), in terms every
// engine has. Both engines implement it; a caller falls back to Info for
// a store that does not.
type Inspector interface {
	// Inspect reports the store's figures now. It reads no record, so it
	// is cheap enough for every show-controller and every scrape (bbolt:
	// the file's meta and free pages; etcd: what the member watch last
	// heard, and nothing asked of etcd).
	Inspect(ctx context.Context) (Inspection, error)
}

// Inspection is what an Inspector reports. A figure the engine does not
// have, or has not learnt yet, is zero.
type Inspection struct {
	Info // Revision: the latest this process has applied

	// SchemaVersion is the version of the engine's own layout (bbolt:
	// its file's, boltstore.SchemaVersion), 0 for an engine that keeps
	// none (etcd: the layout of its keys is the records' own).
	SchemaVersion uint64

	// CompactRevision is the revision up to which the store's history is
	// gone, as far as this process knows: a feed behind it cannot follow
	// (bbolt: the change sets pruned, the last revision whose change set
	// is no longer kept; etcd: the latest compaction this process made or
	// its feed ran into).
	CompactRevision uint64

	// SizeBytes is the space the store's data takes (bbolt: its file as
	// bbolt sees it; etcd: the largest member's database); InUseBytes the
	// part of it that holds data (the rest is free pages, which bbolt
	// reuses and etcd's defragmentation gives back; 0: unknown);
	// QuotaBytes the size past which the engine refuses writes (etcd's
	// space quota, the smallest member's; 0: none, as on bbolt).
	SizeBytes, InUseBytes, QuotaBytes int64

	// Members are the engine's servers as this process last heard from
	// them, in the order configured; none for an engine inside the
	// process (bbolt).
	Members []Member
}

// Member is one server of a store's engine (an etcd member).
type Member struct {
	Endpoint string
	// Up: the member answered this process's last probe; Err is why not.
	Up  bool
	Err string
	// SizeBytes, InUseBytes and QuotaBytes as Inspection's, of this
	// member alone.
	SizeBytes, InUseBytes, QuotaBytes int64
	// Alarms are the alarms the member raised ("NOSPACE", "CORRUPT").
	Alarms []string
	// At is when the member last answered (zero: never: the figures
	// above are unknown).
	At time.Time
}

// MaxScan is the most keys one Scan call visits.
const MaxScan = 1000

// MetaKind is the store's own kind: writes to it are refused.
const MetaKind = "meta"

// Errors every store returns for the same conditions. Callers test them
// with errors.Is; the stores wrap them with detail.
var (
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store closed")

	// ErrUnavailable: the store cannot be reached or cannot commit now
	// (etcd without quorum or unreachable; a bbolt file that cannot be
	// written). The call may be retried.
	ErrUnavailable = errors.New("store unavailable")

	// ErrContention: an Update conflicted with other writers more times
	// than the store retries. The call may be retried.
	ErrContention = errors.New("too much contention on the store")

	// ErrTooLarge: a transaction exceeded a limit of the engine (etcd's
	// operations per transaction or request size).
	ErrTooLarge = errors.New("transaction too large for the store")

	// ErrNoSpace: the engine refuses writes for want of space until an
	// operator frees some (etcd's space quota reached: its NOSPACE
	// alarm). Errors that wrap it wrap ErrUnavailable too.
	ErrNoSpace = errors.New("store out of space")

	// ErrBadKey: a key without a kind, or of the reserved meta kind.
	ErrBadKey = errors.New("bad store key")
)

// Key joins a kind and a key within it.
func Key(kind, rest string) string { return kind + "/" + rest }

// Kind returns the kind of key (its first segment).
func Kind(key string) string {
	kind, _, _ := strings.Cut(key, "/")
	return kind
}

// Rest returns key without its kind.
func Rest(key string) string {
	_, rest, _ := strings.Cut(key, "/")
	return rest
}

// CheckKey refuses keys a function may not write: without a kind, or of
// the reserved meta kind.
func CheckKey(key string) error {
	kind, _, ok := strings.Cut(key, "/")
	switch {
	case !ok || kind == "":
		return errors.Join(ErrBadKey, errors.New("key "+quote(key)+" has no kind"))
	case kind == MetaKind:
		return errors.Join(ErrBadKey, errors.New("key "+quote(key)+" is of the reserved kind meta"))
	}
	return nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return "\"" + s + "\""
}

// Departer is implemented by stores shared among processes (etcd): Depart
// tells the other processes at once that this one is going, ahead of its
// Close: its ephemeral keys are removed and its leaderships end, in one
// request bounded by ctx, where releasing and resigning one by one would
// take a request each. After it, releases and resigns do nothing,
// Ephemeral fails with ErrClosed and Elect waits for its context (or
// Close) as a campaign that cannot win; reads and Updates go on until
// Close. If it fails, the keys go when the process's lease expires.
type Departer interface {
	Depart(ctx context.Context) error
}

// Dumper is implemented by stores that can write every record of one
// revision as a stream
// (backup in etcd mode, provisiond migrate).
type Dumper interface {
	// Dump calls fn for every record, in key order, at one revision,
	// which it returns. Ephemeral keys belong to a live process, not to
	// the controller's data, and are not dumped; nor is the meta kind.
	// An error from fn stops the dump and is returned as it is. It must not block writers for long: bbolt copies
	// from one read transaction; etcd reads pages at a fixed revision.
	Dump(ctx context.Context, fn func(key string, val []byte) error) (rev uint64, err error)
}

// Loader is implemented by stores that can be filled from a dump: an
// empty store only, in batches, with no change sets (a migration target).
type Loader interface {
	// Load writes the records next returns until it returns io.EOF, and
	// returns how many it wrote. A store that holds anything refuses
	// (and writes nothing); a key CheckKey refuses fails the load with
	// ErrBadKey; an error from next is returned. A load that fails part
	// way may leave the records of the batches it committed.
	Load(ctx context.Context, next func() (key string, val []byte, err error)) (n int, err error)
}
