// Package controllerstore opens the controller's store from the daemon's
// settings, for the daemon and for the tools that work on a stopped
// controller (restore, migrate, reset-admin-password, check): the bbolt
// file of a data dir (DBFile), or the controller's prefix of an etcd
// cluster (EtcdConfig), each handed to state.Open; and the durable
// writes of a data dir's files (WriteFileSynced, SyncDir) that restore
// and migrate make before they move files into place.
//
// # Concurrency contract
//
//  1. The package holds no state and starts no goroutine; its functions
//     are safe to call from any goroutine.
//  2. What it opens is the caller's: the caller closes the state (which
//     closes the store) and owns the goroutines the store runs (etcd's
//     replica and lease; bbolt's group commit), which the close stops.
//  3. A bbolt file is opened by one process at a time: a second opener
//     waits for the lock, then fails with boltstore.ErrLocked (the tools
//     report ErrDataDirInUse). An etcd prefix is claimed (ClaimPrefix) by
//     every opener, and may be opened by several daemons at once.
package controllerstore
