// Package boltstore is the bbolt implementation of store.Store, the
// embedded default: one file, one process. It adds to bbolt a revision
// counter, write sets per function over group commit, the persisted change
// feed, ephemeral keys and the store's bookkeeping. It is the only package
// of provisiond that imports bbolt (its subpackage rawbolt, the raw
// benchmark baseline, excepted).
//
// # Data model
//
// A store key "<kind>/<rest>" is kept under rest in the bucket named kind,
// so files written before the store seam (state/db, one bucket per entity
// kind) keep their layout. Buckets are made on demand, by the first write
// of their kind. The store's own buckets are "meta" and those named
// "meta/..." (no kind can be: kinds hold no "/"). "meta" holds the layout
// version (SchemaVersion; an older file is migrated once when it opens, a
// newer one refused) and the revision. The change set of every revision
// that has one is stored, keyed by the big-endian revision, in the same
// bbolt transaction as the writes it describes: first in "meta/recent",
// small enough for bbolt to keep inline in the root page every commit
// rewrites anyway, and, eight at a time, moved to "meta/changes", whose
// oldest beyond Options.Retention revisions are pruned 64 at a time (so a
// persisted change set costs a lone commit a quarter of a page on average,
// not two pages). "meta/ephemeral" lists the keys this process holds with
// Ephemeral.
//
// The revision goes up by one for every Update function that wrote
// something, and is stored in the same bbolt transaction as the writes it
// counts. A function that fails, panics or writes nothing (a delete of a
// missing key is nothing) spends no revision.
//
// Values a View returns (Get, Scan) are copies, valid after the view and
// after the file is remapped. GetFunc hands its callback the value in place
// (in bbolt's memory map), valid only while it runs, for reads that only
// compare or decode it.
//
// # Concurrency contract
//
//   - Store owns one committer goroutine, started by Open and stopped and
//     waited for by Close. One commit runs at a time: either the committer
//     goroutine's or a lone writer's own (below).
//   - A lone writer (no commit in progress, nothing queued, and the last
//     commit was of one function: not under load) runs its function and
//     commits on its own goroutine, as bbolt's Update does: there is nobody
//     to group it with, and handing it to the committer and the answer back
//     would cost two goroutine wake-ups per write.
//   - Otherwise Update queues its function and waits for the answer (or for
//     its context: a function whose caller has gone before it runs is not
//     run). When the commit in progress ends, the committer takes
//     everything queued (never waiting for more: a writer is never delayed
//     to wait for company), up to 1,024 functions, and runs them one after
//     another in one bbolt read-write transaction.
//   - Each function runs over its own write set: its reads see the write
//     set first, then the bbolt transaction, which holds what the functions
//     before it in the batch wrote. When it returns nil its write set is
//     written to the bbolt transaction and it gets the next revision; when
//     it fails or panics its write set and changes are dropped and it gets
//     its error, and nobody else is run again. So every function runs
//     exactly once and, running alone over the state its predecessors left,
//     never conflicts. Txn.Nest keeps an undo log of the write set so a
//     failed part is taken back without leaving the function.
//   - Then one fsync for the batch, then Options.Feed.Apply with the change
//     set of each committed function in revision order, then the revision
//     moves (WaitApplied), and only then every caller of the batch is
//     answered, those that failed or wrote nothing too (they read what the
//     others wrote, which is durable only now). So an Update that returns is
//     on disk and applied, and Apply sees every revision with a change set
//     exactly once, in order, whichever goroutine committed; calls of Apply
//     never overlap.
//   - A failed begin, write or commit of the bbolt transaction fails every
//     caller of its batch (with store.ErrUnavailable) and commits nothing;
//     Health reports it until a commit succeeds (it tries one of its own).
//     A commit running longer than Options.StuckAfter makes Health fail too.
//   - Update functions must act only through the Txn they are given: no side
//     effects outside it, no retaining the Txn or the values it returns (a
//     Txn used after its function returned fails), no calls to Update or
//     View (a deadlock).
//   - View runs a bbolt read-only transaction on the calling goroutine.
//     Readers see the last committed revision and do not block the
//     committer, except when the file outgrows the memory map (see
//     Options.InitialMmapSize), when bbolt's remap waits for open readers.
//   - Ephemeral puts and releases commit like any Update (a change each);
//     Close removes the keys still held, in one commit, before it drains the
//     queue; Open removes those a process that died without closing left.
//   - Elect takes a per-name token: the process leads at once, callers in
//     it take turns. Leading contexts end with resign or Close.
//   - A file removed, replaced or truncated under the store, or a memory
//     fault reading it, fails the store for good (fault.go): no write is
//     answered after it, everything is refused, Options.Failed is called
//     once. The file is checked before and after each commit, at Health,
//     and every few seconds on the committer's timer while idle.
//
// # Not on the production path
//
// The raw bbolt baseline of the benchmarks is package rawbolt; the crash
// harness's planted durability bug (crashbug.go) is compiled only with
// -tags crashbug, and otherwise the committer's call of it is a branch on
// a constant false the compiler removes.
package boltstore
