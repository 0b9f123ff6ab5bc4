// Package backup makes, fetches, verifies and restores backup archives of
// a controller: the daemon's GET /backup (Handler: a snapshot of the bbolt
// database, or on etcd a dump of the store loaded into one, streamed with
// the data dir's identity files between a manifest and its digest),
// Fetch (provisiond backup), UnpackArchive and Manifest (check and
// restore verify an archive before anything is used), Restore into a bbolt
// data dir and RestoreToEtcd into an empty etcd prefix (through
// internal/migrate).
//
// # Layout
//
//   - backup.go: the archive, Handler, Fetch, Restore.
//   - manifest.go: the manifest and its digest, UnpackArchive.
//   - etcd.go: the snapshot of a store on etcd; RestoreToEtcd.
//
// # Concurrency contract
//
//  1. Handler is safe for concurrent use; net/http runs each request in
//     its own goroutine. One backup runs at a time: a request while one
//     runs is answered 503 with Retry-After.
//  2. A backup holds the database only while it copies the snapshot into
//     a temporary file in the data dir (one read transaction, bounded by
//     backupSnapshotTimeout), never while it streams to a slow client;
//     the file is removed when the request ends, and RemoveStale removes
//     those a daemon that died mid-backup left (at start, before serving).
//  3. Fetch, Restore, RestoreToEtcd and UnpackArchive run in the caller's
//     goroutine and start none. Restore refuses a data dir a daemon holds
//     (ErrDataDirInUse) and moves files into place only once the archive
//     is verified and its database opens and passes its check, the
//     database last.
package backup
