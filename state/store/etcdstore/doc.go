// Package etcdstore is the store.Store on etcd (go.etcd.io/etcd/client/v3):
// several provisiond daemons, one controller, one etcd cluster. It is the
// only package of provisiond, with internal/etcdtest, that imports etcd.
//
// # Keys
//
// A record's store key k lives at etcd key Prefix + k (default prefix
// "/provisiond/"). The store's own keys are of the meta kind, which
// functions can neither write nor read: meta/changes (the feed key),
// meta/elect/<name>/ (elections) and meta/load (a Load in progress).
//
// # Reads: a local replica
//
// The store keeps a replica of the whole prefix in memory: a paged Get at
// one revision R when it opens, then a watch from R+1. The watch goroutine
// applies each watch response to a working B-tree (github.com/google/btree)
// and publishes a copy-on-write Clone of it (O(1); later writes copy only
// the nodes they touch) as the snapshot readers use, swapped atomically;
// an Update applies its own commit the same way when it can (see "The
// change feed"). So View costs no round trip: an atomic load and tree
// lookups. A revision is never split across responses: etcd's watchable
// store sends the events of one revision in one response, its catch-up
// batches end at revision boundaries, and the store does not ask for
// fragmented responses. A catch-up batch (at most 1,000 revisions) carries
// etcd's current revision in its header while more batches are to come,
// so the replica takes a response's last event, not its header, for what
// it has; only an empty response (a progress notification, sent to a watch
// that has caught up) moves it to its header's revision.
//
// The replica is known current when, within StaleAfter, the watch
// delivered a response, or a probe found it current: after StaleAfter/4
// of silence the store reads the feed key (a linearizable read, which
// needs a quorum) and, if no commit of ours is newer than what the watch
// has delivered (the Updates' own applies do not count: the probe vouches
// for the watch), it was current as of that read. Otherwise (etcd
// unreachable, no quorum: the watch also requires a leader, so a member
// cut off from its cluster ends it; or a commit seen by the probe that
// the watch has not delivered) View, Update, Ephemeral and Health fail
// with store.ErrUnavailable. So reads lag the cluster by at most
// StaleAfter, and a process always reads its own writes. The probe does
// not see removals by lease expiry (they do not touch the feed key): those
// arrive with the watch.
//
// # Reads that must be current: Sync
//
// Sync makes the replica as current as a linearizable read made when it
// is called (the feed key's mod revision, then a wait for the replica to
// apply it), or fails with store.ErrUnavailable within RequestTimeout;
// concurrent calls share reads (sync.go). state's credential checks read
// after it, so a password changed through any daemon is refused by every
// daemon once the change is acknowledged, and a daemon cut off from etcd
// refuses logins instead of trusting its replica.
//
// # The members
//
// gRPC closes a connection to a member that hangs (SIGSTOP, a stalled
// disk or VM) only after its keepalive, at least 10 s plus the timeout.
// The member watch (members.go) probes each member on a connection of its
// own every RequestTimeout/4 (its status and a linearizable read with a
// leader, within RequestTimeout/2); while another member answers, the
// store's client is kept off those that do not (SetEndpoints) and its
// connections to them are closed at once (the store's dialer tracks
// them), so the requests, the watch and the lease keepalive on them start
// again elsewhere. The status gives each member's database size and
// etcd's space quota (Members, for metrics) and its alarms.
//
// # Space, and the prefix registry
//
// etcd past its space quota refuses every write (NOSPACE): Update fails
// with store.ErrNoSpace, Health reports the alarm (AlarmList), and
// ReclaimSpace compacts, defragments and disarms (space.go). Controllers
// sharing an etcd must not have nested prefixes (a replica would load the
// other's records): ClaimPrefix registers the prefix under PrefixRegistry,
// outside every prefix, in one transaction that refuses a registered
// ancestor or descendant (claim.go).
//
// # Writes: one etcd transaction per Update
//
// Update runs its function on the latest snapshot (revision A), recording
// its read set: each key read with the mod revision it had (0 if absent),
// and each range a scan covered. Writes are buffered. The commit is one
// etcd Txn:
//
//	If(   ModRevision(key) == seen           for each key read (scanned keys included)
//	      ModRevision(range) < A+1           for each range scanned: nothing put there since A
//	) Then( the puts and deletes, and the put of the feed key with the change set )
//
// When the compares would exceed MaxTxnOps, one guard compare replaces
// them: the feed key's mod revision is what it was at A (no commit of ours
// since). It makes unrelated commits conflict and does not see a removal
// by lease expiry, which only ever removes ephemeral keys. A refused
// compare makes Update wait for the replica to reach the revision etcd
// answered with and run the function again, up to 100 times with a
// growing random pause, then fail with store.ErrContention. A commit
// larger than MaxTxnOps operations or MaxRequestBytes fails with
// store.ErrTooLarge before it is sent (and so does one etcd refuses for
// those reasons: the message names etcd's --max-txn-ops and
// --max-request-bytes).
//
// # Writes: group commit
//
// At most Config.CommitsInFlight (default 4) etcd transactions of Updates
// are in flight. An Update that finds fewer sends its commit at once,
// alone, as above: a lone writer never waits for company. The others
// queue; when a transaction returns, the Update that sent it hands the
// queue on to the first queued one, which sends it with every queued
// commit that can share its transaction, as nested transactions of one
// etcd transaction with no compares of its own:
//
//	Then( Txn(If(compares of 1) Then(writes of 1) Else(read the feed key)),
//	      Txn(If(compares of 2) Then(writes of 2) Else(read the feed key)), ...
//	      put of the feed key: each member's change set with its witness )
//
// Each member commits or not on its own; those that do share the
// revision. etcd evaluates every compare of a transaction before applying
// any of its writes, so members must not depend on each other: a commit
// that writes what a member writes waits for a later transaction, and one
// that read or scanned what a member writes is not sent at all but run
// again once the group has committed (its compares would fail). A commit
// under the guard compare, or one that puts nothing, goes alone. The
// group stays within MaxTxnOps as etcd counts nested transactions (each
// may have MaxTxnOps less the outer's count) and within MaxRequestBytes;
// if etcd refuses it for its shape anyway, each member is sent alone. The
// group's context is the store's, not one member's, bounded by
// RequestTimeout. The feed value names for each member its witness, the
// least key it puts: a member's change set belongs to the revision only if
// the revision put its witness (a failed member wrote nothing).
//
// Under load this cuts etcd's work per write (one raft entry, one apply
// transaction, one watch response for a whole group): see BenchmarkUpdate
// and BenchmarkUpdateInFlight against BenchmarkRawTxn. Stats.Groups and
// Stats.Grouped count it.
//
// Other failures of a commit are store.ErrUnavailable and are not retried:
// a commit whose answer was lost may have happened, and running the
// function again could apply it twice. A caller that retries must make its
// function idempotent, as the rpc clients of provisiond already must.
//
// # The change feed
//
// Every commit puts its change set, encoded compactly, to the feed key in
// the same transaction, so its watch event hands every process every
// change set at its revision. Revisions without one (the lease of a dead
// process expiring; a write by another tool) reach Feed.Apply as changes
// derived from their keys: removed, created, or no fields for an
// overwrite. Update returns once the local replica has applied its
// revision and Feed.Apply has returned for it. When a commit's revision is
// the one after the latest the replica applied, the Update that sent it
// applies it itself, from what it sent (an etcd revision is one
// transaction, so the replica with its writes is the prefix at that
// revision), without waiting for the watch to deliver it: etcd sends the
// event as it answers, but on the watch's stream, and the watch
// goroutine's wake-up follows. The watch skips revisions applied already.
// A commit with a revision between (another daemon's, a lease's expiry, a
// write outside the prefix) waits for the watch, as before.
// Stats.OwnApplied counts them. If the watch reports its
// start revision compacted (the process fell behind etcd's compaction,
// say while cut off), the store reloads the replica at the current
// revision, calls Feed.Reset, logs it and counts it (Stats.Resets).
//
// # What etcd needs
//
// Limits of at least what the store is told (MaxTxnOps, MaxRequestBytes;
// internal/etcdtest runs with --max-txn-ops=1024
// --max-request-bytes=8388608), and compaction: the feed key gets a new
// version at every commit, so an etcd without auto-compaction grows until
// its space quota stops writes (store.ErrUnavailable). The retention bounds
// how long a process may be cut off before it must reload (Feed.Reset).
//
// # Concurrency contract
//
//   - Store is safe for concurrent use. Open starts the watch goroutine,
//     which writes the replica and calls Feed.Apply and Feed.Reset, one at
//     a time, in revision order; Close stops it and waits for it. An
//     Update that applies its own commit does the same on its goroutine,
//     under the same mutex (applyMu), so Feed's calls never overlap and
//     stay in revision order, each revision once.
//     While a watch runs, its probe goroutine reads the feed key after
//     each StaleAfter/4 of silence; it ends with the watch.
//     Open also starts one member watch goroutine per endpoint (each
//     with an etcd client of its own when there are several), which
//     Close stops and waits for.
//   - The store's lease (Ephemeral keys, elections) is granted on first
//     use; a keepalive goroutine owned by the store drains its keepalive
//     responses and, if the lease is lost, puts the live ephemeral keys
//     again under a new one. Each leadership has a monitor goroutine,
//     which ends the leading context when the lease goes, the store
//     closes or resign is called, and then resigns. Depart (a daemon's
//     stop, before Close) revokes the lease in one request bounded by its
//     context: the keepalive goroutine and the monitors then end without
//     putting back or resigning, and no lease is granted again. Close
//     revokes the lease unless Depart tried, and stops and waits for all
//     of them.
//   - View never blocks: it reads the latest published snapshot on the
//     caller's goroutine. Values it returns are never modified (the tree
//     keeps each one until it is replaced by a new slice).
//   - Update blocks on its etcd round trip (bounded by RequestTimeout;
//     queued behind at most the transactions in flight, each so bounded,
//     when CommitsInFlight are),
//     then on its revision being applied, by itself or by the watch
//     goroutine (bounded by RequestTimeout); on a conflict, on the replica reaching the
//     conflicting revision and a random pause. Its function runs on the
//     caller's goroutine and must not call the store.
//   - Close waits for Updates in progress (each bounded as above, and so
//     for a Feed.Apply one of them runs), ends waits and campaigns with
//     store.ErrClosed, and waits for the watch goroutine (and so for a
//     Feed call it makes).
package etcdstore
