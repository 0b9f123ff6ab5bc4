package state

import "context"

// syncer is a store whose reads come from a replica that may lag the
// cluster (etcd): Sync brings it up to every commit made before the call,
// or fails with store.ErrUnavailable when the cluster cannot say within
// the store's request timeout.
type syncer interface {
	Sync(ctx context.Context) error
}

// viewCurrent is view for reads that must not be stale: credential
// checks. On a replicated store it first makes the replica current (a
// quorum read and a wait for the replica to reach it), so a password
// changed through another daemon is never accepted after the change was
// acknowledged, and a daemon that cannot reach the cluster refuses (with
// store.ErrUnavailable, code "try again") rather than trust what it has.
// On bbolt it is view.
func (st *State) viewCurrent(ctx context.Context, fn func(r reader) error) error {
	if s, ok := st.store.(syncer); ok {
		if err := s.Sync(ctx); err != nil {
			return err
		}
	}
	return st.view(ctx, fn)
}
