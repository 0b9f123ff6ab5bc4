package state

import (
	"context"
	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
)

// bulk applies the n items of a bulk call in one transaction: item i runs
// fn(tx, i) in a part of it of its own (store.Txn.Nest), so an item that
// fails has its writes undone and the others commit. It returns each
// item's error (nil for an item that committed, or had nothing to write:
// errNoChange). If the transaction itself fails (the store unavailable,
// contention), the items that had not failed on their own get its error:
// none of them committed; when ctx ends during the commit, every item gets
// ctx's error (the commit may still happen). A transaction too large for the store's engine
// (etcd's limits) is split in two halves, each one transaction, and so on.
func (st *State) bulk(ctx context.Context, n int, fn func(tx *txn, i int) error) []error {
	errs := make([]error, n)
	st.bulkRange(ctx, errs, 0, n, fn)
	return errs
}

func (st *State) bulkRange(ctx context.Context, errs []error, lo, hi int, fn func(tx *txn, i int) error) {
	if lo >= hi {
		return
	}
	// The transaction function writes part, not errs: on bbolt it runs on
	// the committer goroutine, and an update whose ctx ends while its
	// batch commits returns at once (store.Store) with the function maybe
	// still running. part is read only when update returned otherwise.
	part := make([]error, hi-lo)
	err := st.update(ctx, func(tx *txn) error {
		for i := lo; i < hi; i++ { // the function may run again: every item's error is set anew
			e := tx.Nest(func() error { return fn(tx, i) })
			if errors.Is(e, errNoChange) {
				e = nil
			}
			part[i-lo] = e
		}
		return nil
	})
	if errors.Is(err, store.ErrTooLarge) && hi-lo > 1 {
		mid := lo + (hi-lo)/2
		st.bulkRange(ctx, errs, lo, mid, fn)
		st.bulkRange(ctx, errs, mid, hi, fn)
		return
	}
	if err != nil && ctx.Err() != nil {
		for i := lo; i < hi; i++ { // what became of each item is not known
			errs[i] = err
		}
		return
	}
	for i := lo; i < hi; i++ {
		errs[i] = part[i-lo]
		if err != nil && errs[i] == nil {
			errs[i] = err
		}
	}
}
