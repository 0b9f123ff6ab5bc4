// Package db is the transactional key/value store under package state: a thin
// layer over bbolt that adds a revision counter, a change feed and group
// commit. It is the only package of provisiond that imports bbolt.
//
// # Data model
//
// Buckets are named by a string (state uses the entity kind), keys are
// strings and values are bytes. A "meta" bucket holds the schema version and
// the revision: a uint64 that goes up by one for every successful Update
// function, stored in the same bbolt transaction as the writes it counts.
//
// Nothing returned by this package points into bbolt's memory map: Get,
// ForEachPrefix and the values handed to callbacks are copies, so they stay
// valid after the transaction ends and after the file is remapped. The one
// exception is ReadTx.GetFunc, whose callback is handed the value in place,
// valid only while it runs, for reads that only compare or decode it.
//
// # Concurrency contract
//
//   - DB owns one committer goroutine, started by Open and stopped and
//     waited for by Close. One commit runs at a time: either the committer
//     goroutine's or a lone writer's own (below).
//   - A lone writer (no commit in progress, nothing queued, and the last
//     commit was of one function: not under load) runs its function and
//     commits on its own goroutine, as bbolt's Update does: there is nobody
//     to group it with, and handing it to the committer and the answer back
//     would cost two goroutine wake-ups per write.
//   - Otherwise Update queues its function and blocks until the answer.
//     When the commit in progress ends, the committer takes everything
//     queued (never waiting for more: a writer is never delayed to wait for
//     company), runs the functions in order in one bbolt read-write
//     transaction, fsyncs, calls Options.OnCommit with one Committed per
//     function in revision order, and only then answers the callers. So an
//     Update that returns nil is on disk, and OnCommit sees every revision
//     exactly once, in order, with no gaps, whichever goroutine committed.
//   - If a function fails or panics, the whole bbolt transaction is rolled
//     back, that function gets its error and the rest of the batch is run
//     again without it. Update functions must therefore act only through
//     the WriteTx they are given: no side effects outside it, no retaining
//     the WriteTx or the values it returns, no calls to Update or View.
//   - View runs a bbolt read-only transaction in the calling goroutine.
//     Readers see the last committed revision and do not block the
//     committer, except when the file outgrows the memory map (see
//     Options.InitialMmapSize), when bbolt's remap waits for open readers.
//
// The API (a read transaction, a write transaction that records changes, a
// revision and an ordered commit feed) is kept small on purpose, so that a
// distributed store such as etcd can stand behind package state later.
package boltstore
