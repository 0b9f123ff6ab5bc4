package state

import (
	"context"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
)

// OneView runs fn with a State whose reads all see one revision of the
// store: the latest this process had applied when OneView was called. A
// reader of several kinds of record (ModelAdmin's Status: machines,
// units, applications, storage) gets one consistent picture, not parts
// read at different revisions. The State fn is given only reads: its
// writes fail, it must not be used to watch (a watcher's snapshot would be
// older than its subscription), nor after fn returns. On bbolt the
// view is one read transaction, held while fn runs.
func (st *State) OneView(ctx context.Context, fn func(*State) error) error {
	return st.store.View(ctx, func(r store.Reader) error {
		p := *st
		p.store = pinnedStore{Store: st.store, r: r}
		return fn(&p)
	})
}

// errOneViewWrite is what a write through a OneView State returns.
var errOneViewWrite = errors.New("state: a State of one view only reads")

// pinnedStore is the store of a OneView State: every View reads the
// one view r, and Update fails.
type pinnedStore struct {
	store.Store
	r store.Reader
}

func (p pinnedStore) View(_ context.Context, fn func(store.Reader) error) error { return fn(p.r) }

func (p pinnedStore) Update(context.Context, func(store.Txn) error) (uint64, error) {
	return 0, errOneViewWrite
}
