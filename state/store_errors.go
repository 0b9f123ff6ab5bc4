package state

import "github.com/provisiond/provisiond/state/store"

// The store's errors, as callers above state see them (facades map them to
// wire codes; they never import the store). Errors from State's methods
// wrap them.
var (
	// ErrStoreUnavailable: the store cannot be reached or cannot commit now
	// (etcd unreachable or without quorum). The call may be retried.
	ErrStoreUnavailable = store.ErrUnavailable
	// ErrStoreContention: a write conflicted with other writers more times
	// than the store retries. The call may be retried.
	ErrStoreContention = store.ErrContention
	// ErrStoreClosed: the daemon is stopping.
	ErrStoreClosed = store.ErrClosed
	// ErrStoreTooLarge: one write exceeded the store's limits (etcd's
	// --max-txn-ops or --max-request-bytes).
	ErrStoreTooLarge = store.ErrTooLarge
	// ErrStoreNoSpace: the store refuses writes until an operator frees
	// space (etcd's space quota reached). Errors wrapping it wrap
	// ErrStoreUnavailable too.
	ErrStoreNoSpace = store.ErrNoSpace
)
