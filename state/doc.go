// Package state is provisiond's model of a Juju controller: the controller
// record, models, users and machines, their validation and life cycle, and
// the change sets that watchers are built on. It keeps its records,
// JSON-encoded, in a bbolt file through package state/store/boltstore; nothing else in
// provisiond sees the database.
//
// # Records and keys
//
// Each entity kind has a bucket named after its Kind (KindModel, ...).
// Per-model entities are keyed "<model-uuid>/<id>"; models are keyed by
// UUID, users by name, controller-wide records by a fixed id. Every record
// carries the revision it was last written at. Index buckets hold derived
// keys: model names, sequences, and units by their container's provider id
// ("<model>\x00<provider id>\x00<unit>", kept by the write helpers and
// rebuilt when the file is opened, so an older build's writes cannot leave
// it stale).
//
// # Change sets
//
// Every write goes through one helper that records a watcher.Change of the
// entity it touches: Kind, Model (the model UUID; "" for controller-wide
// entities such as users and the controller record), ID and the Fields that
// changed. Each committed write is one revision; its changes are published
// to the Hub as one watcher.ChangeSet stamped with that revision.
//
// # Concurrency contract
//
//   - State is safe for concurrent use. It owns no goroutine itself; the
//     database (state/store/boltstore) owns one committer goroutine, started by Open and
//     stopped and waited for by Close.
//   - Writes from concurrent callers may share one bbolt commit (group
//     commit); a lone writer is never delayed. A write method returns only
//     after its commit is on disk.
//   - Change sets are published by the goroutine that committed (the
//     committer, or a lone writer committing its own write) after the commit
//     is on disk and before the writer is answered, one per revision, in
//     commit order. So publish order == commit order, and when a write
//     method returns, every watcher it affects has already been triggered.
//   - Reads run in read-only transactions on the caller's goroutine. They
//     see the last committed revision and do not block writers (bbolt's
//     memory map is sized so that a remap, the one case where bbolt makes a
//     writer wait for readers, is rare).
//   - Machine decodes through a cache of decoded machine records shared by
//     all readers (lock-free; machines read more than once, at most 1,024
//     of them, about 1 MB). An
//     entry is used only when the record's stored bytes are equal to the
//     ones it was decoded from, so a read still returns exactly what its
//     transaction holds, and each caller gets its own deep copy.
//   - Expensive work (password hashing) is done outside transactions, so
//     it never holds up the committer.
//   - Watch methods subscribe to the Hub first and then read, so a change
//     committed in between is seen at least once.
package state
