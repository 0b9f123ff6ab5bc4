package state

import (
	"time"

	"github.com/provisiond/provisiond/state/store"
)

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

// noSpaceRefusal is a write the store refused for want of space.
type noSpaceRefusal struct {
	at  time.Time
	err error
}

// NoSpace returns when a write of this State was last refused for want of
// space (an error wrapping ErrStoreNoSpace), and that error; a zero time
// when none was. The daemon's /health reports it at once rather than a
// result of its probe from before it.
func (st *State) NoSpace() (time.Time, error) {
	r := st.noSpace.Load()
	if r == nil {
		return time.Time{}, nil
	}
	return r.at, r.err
}
