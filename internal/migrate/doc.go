// Package migrate copies a stopped controller from one store to another,
// empty one (provisiond migrate: bbolt to etcd or etcd to bbolt; restore
// into etcd), and a live one on etcd into a bbolt database (a backup of it,
// Snapshot): a dump of the source at one revision streamed into the
// target's load, the identity moved between a data dir's files and the
// store's identity record, the agent binaries between data dirs, and the
// target read back and compared (count and digest) before it is used.
//
// # Layout
//
//   - migrate.go: Run, its Config and Result, the checks of source and
//     target, the identity, the agent binaries, staging a data dir.
//   - copy.go: the copy of records (store.Dumper into store.Loader) and
//     the order-independent digest that verifies it.
//
// # Concurrency contract
//
//  1. Run and Snapshot run in the caller's goroutine and start none of
//     their own; the stores they open are closed before they return.
//  2. The source must not change during a Run: it refuses a bbolt data
//     dir a daemon holds and an etcd prefix that daemons serve, and
//     fails if the source's count or revision moved during the copy.
//     Snapshot reads a live store once, at one revision.
//  3. The target is written only when empty. A bbolt target is staged in
//     a directory inside the data dir and moved into place, the database
//     last, once verified; an etcd target is loaded under a mark that
//     daemons refuse, removed again if the load fails part-way.
//  4. ctx bounds the copy; a cancelled Run leaves the target as in 3.
package migrate
