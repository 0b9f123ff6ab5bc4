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
// none of them committed. A transaction too large for the store's engine
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
	err := st.update(ctx, func(tx *txn) error {
		for i := lo; i < hi; i++ { // the function may run again: every item's error is set anew
			errs[i] = tx.Nest(func() error { return fn(tx, i) })
			if errors.Is(errs[i], errNoChange) {
				errs[i] = nil
			}
		}
		return nil
	})
	if errors.Is(err, store.ErrTooLarge) && hi-lo > 1 {
		mid := lo + (hi-lo)/2
		st.bulkRange(ctx, errs, lo, mid, fn)
		st.bulkRange(ctx, errs, mid, hi, fn)
		return
	}
	if err != nil {
		for i := lo; i < hi; i++ {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
}
