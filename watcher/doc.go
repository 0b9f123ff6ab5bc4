// Package watcher turns committed state changes into the events that agents
// block on with NotifyWatcher.Next and StringsWatcher.Next.
//
// # Pieces
//
//   - Hub: state publishes one ChangeSet per commit, after the commit is on
//     disk and in commit order. The hub hands each Change to the
//     subscriptions whose Filter matches it. It has no goroutine of its own
//     and never blocks the publisher: every Sink must return at once.
//   - Notify and Strings: coalescing watchers. A Notify holds one pending
//     bit, a Strings a set of pending ids; any number of changes between two
//     Next calls collapse into one event. NextAsync takes the next event
//     without blocking: its callback runs once there is a pending event
//     (at once if there is one), the watcher is stopped (ErrStopped), or its
//     context ends, on whichever goroutine brought that about, so a waiting
//     agent's Next holds no goroutine in the daemon. Next is the blocking
//     form, for tests and tools.
//   - Timer blocks (timers.go), on a Clock and stopped with their watcher:
//     Batch delivers ids to a Strings watcher in batches after a quiet
//     period (the start-times watcher); NewTimerNotify is a notify watcher
//     that fires a delay after each event it delivers (the machine error
//     retry watcher).
//   - Resources: the per-connection registry of watchers (and anything else
//     with a Stop method), handing out ids "1", "2", ... that are never reused
//     on that connection, and stopping everything when the connection ends.
//
// # Contract
//
// A watch subscribes first and then reads its initial snapshot, so a change
// that commits in between is seen at least once: a spurious wake-up is
// allowed, a missed change is a bug. When the publisher itself may have
// missed changes (state's store could not follow its feed), Hub.Reset
// reaches every subscription: a Notify fires; a Strings, which cannot say
// which ids it missed, fails every Next with ErrReset and its client
// watches again. Changes are delivered to a sink in
// commit order. Sinks run with the read lock of the hub's shard holding
// their subscription (the hub's subscriptions are in 64 shards, each with
// its own lock, so that thousands of connections ending at once do not
// queue on one lock to cancel their watchers): they may take their own
// small mutex, never a lock that a publisher could be waiting on. A
// subscription made while a commit is being published may see some of
// its changes and not others; the watch's snapshot, read after it
// subscribed, holds that commit (state's stores publish a commit once
// readers see it). A retired hub (Hub.Retire: a stopping daemon's)
// cancels nothing: a stopped watcher's subscriptions stay, and its sink
// ignores what still reaches it.
//
// This package imports nothing of the project's.
package watcher
