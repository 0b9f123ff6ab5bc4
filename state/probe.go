package state

import "context"

// ProbeWrite runs a write transaction that changes nothing: it returns once
// the writer has taken and let go of it, queued behind the commits in
// progress like any write. The daemon's /health uses it to tell a store
// whose commits hang from one that commits. It spends no revision and
// publishes nothing.
func (st *State) ProbeWrite(ctx context.Context) error {
	return st.update(ctx, func(*txn) error { return errNoChange })
}
