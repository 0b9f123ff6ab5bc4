// Package state is provisiond's model of a Juju controller: the controller
// record, models, users and machines, their validation and life cycle, and
// the change sets that watchers are built on. It keeps its records,
// JSON-encoded, in a store.Store (package state/store): the caller opens
// the store, bbolt (package state/store/boltstore) or etcd
// (state/store/etcdstore), with the feed Feed returns, and hands it to
// Open. State reaches the store through the interface only, engine
// figures included (store.Inspector: InspectStore, Stats); nothing else
// in provisiond sees the store's records.
//
// # Records and keys
//
// Keys are the store's flat keys "<kind>/<rest>". An entity of kind K is
// kept under "K/<model-uuid>/<id>" when per-model, "K/<id>" for models
// (by UUID), users (by name) and controller-wide records (by a fixed id)
// (entityKey). Records carry no revision: the revision is the store's
// (State.Revision); records written before the store seam still carry a
// "rev" field, which decoding ignores. Other kinds hold keys that record no
// changes: sequences ("sequence/<model>/<name>"), state's own schema
// version ("schema/state", SchemaVersion: a store written by an older build
// is migrated once when it opens, migrate.go; a newer one is refused, so an
// older build never writes a store whose indexes it does not keep), and the
// derived indexes ("idx-<index>/<model>\x00<value>\x00<id>": units by
// provider id and by machine, models by name), kept through one registry
// (index.go): tx.put and tx.remove read the index values of the record as
// stored and of the one written, and move the entity's entries in the same
// transaction. No index is rebuilt on open.
//
// # Change sets
//
// Every write goes through one helper that records a watcher.Change of the
// entity it touches: Kind, Model (the model UUID; "" for controller-wide
// entities such as users and the controller record), ID and the Fields that
// changed. Each committed write is one revision; the store persists its
// changes with it and hands them to State (the store's Feed), which
// publishes them to the Hub as one watcher.ChangeSet stamped with that
// revision.
//
// # Concurrency contract
//
//   - State is safe for concurrent use. It owns no goroutine itself; the
//     store owns its own (boltstore: one committer goroutine, started by
//     Open and stopped and waited for by Close).
//   - A write method is one store transaction (State.update): its function
//     reads through the transaction, buffers its writes in it and records
//     its changes. The function may run more than once (etcd reruns it
//     when what it read changed before it could commit), so it acts only
//     through the transaction: the clock is read (tx.now), passwords
//     hashed and random values drawn before it. A function that fails, or
//     returns errNoChange, or writes nothing commits nothing and spends no
//     revision. On bbolt, writes from concurrent callers share one commit
//     (group commit, each with its own write set); a lone writer is never
//     delayed.
//   - A write method returns only after its commit is durable and its
//     change set has been published to the Hub by this process: change
//     sets are published by the store's feed (on bbolt the goroutine that
//     committed) after the commit is durable and before the writer is
//     answered, one per revision, in revision order. So publish order ==
//     commit order, and when a write method returns, every watcher it
//     affects has already been triggered.
//   - Decisions that must hold across daemons sharing a store are taken
//     inside the write's transaction, from what it reads there: machine
//     ids and unit numbers (per-model sequences, nextSequence), a local
//     charm's URL (deployCharm), AddUnits' units and machines (all or
//     none), the CAAS storage checks of UpdateCAASUnits. No process-local
//     lock or counter decides anything another process could contradict.
//   - Bulk writes (SetMachineStatuses, ...) apply their items in one
//     transaction (bulk.go), each item in a part of its own (Txn.Nest):
//     an item that fails has its writes undone and keeps its error, the
//     others commit together.
//   - Reads run in read views of the store on the caller's goroutine
//     (bbolt: a read-only transaction). They see the last revision this
//     process applied and do not block writers (bbolt's memory map is
//     sized so that a remap, the one case where bbolt makes a writer wait
//     for readers, is rare). Scans go through the store's bounded Scan,
//     page by page (scan).
//   - Every method that may block (it reads or writes the store, or reads
//     a watcher's snapshot) takes the caller's ctx first and hands it to
//     the store: when ctx ends, a write stops waiting for its commit (and
//     commits whole or not at all) and a credential check stops waiting
//     for etcd's quorum read. Each write is also bounded by writeTimeout,
//     for callers whose ctx never ends. A watch uses ctx for its snapshot
//     only: its sink runs on the hub's publish.
//   - Machine decodes through a cache of decoded machine records shared by
//     all readers, and every read of a unit, an application or a model
//     (get, CAASUnits, the CAAS unit updates' reads in their write
//     transactions, Model and the model reads of nearly every write)
//     through the package's caches of those (record_cache.go: lock-free;
//     records read more than once, at most 1,024 of each kind, about 1 MB
//     each). An entry is used only when the record's stored bytes are equal
//     to the ones it was decoded from, so a read still returns exactly what
//     its view or transaction holds, and each caller gets its own deep copy.
//   - Expensive work (password hashing) is done outside transactions, so
//     it never holds up the committer.
//   - Watch methods subscribe to the Hub first and then read, so a change
//     committed in between is never missed; each watcher is stamped with
//     the revision of its snapshot's view and drops the changes at or below
//     it (the snapshot holds them), so such a change wakes it no more
//     (watch_stamp.go). Changes that arrive before the stamp is known wait
//     for it.
//   - When the store cannot follow its feed (etcd compacted past it) it
//     calls Feed.Reset; state resets every watcher through the hub
//     (watcher.Hub.Reset): a notify watcher fires, a strings watcher fails
//     with watcher.ErrReset so its client watches again.
package state
