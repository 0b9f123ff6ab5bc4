package facade

import (
	"context"

	"github.com/provisiond/provisiond/rpc/params"
)

// BulkWrite is a bulk call whose writes commit in one state transaction
// (the "bulk calls apply their valid items in one transaction"):
// resolve checks each item and turns it into its write (an item it refuses
// keeps its error and is left out), and write applies the resolved ones
// with one bulk call of state, which returns their errors in order. Once
// ctx is done (the client has gone) nothing is written: each item gets
// ErrCallCancelled, as Bulk does.
func BulkWrite[A, W any](ctx context.Context, items []A, resolve func(A) (W, error), write func([]W) []error) params.ErrorResults {
	errs := BulkWriteErrors(ctx, items, resolve, write)
	out := make([]params.ErrorResult, len(items))
	for i, e := range errs {
		out[i].Error = e
	}
	return params.ErrorResults{Results: out}
}

// BulkWriteErrors is BulkWrite, returning each item's wire error (nil for
// an item written).
func BulkWriteErrors[A, W any](ctx context.Context, items []A, resolve func(A) (W, error), write func([]W) []error) []*params.Error {
	out := make([]*params.Error, len(items))
	var (
		ws  []W
		idx []int
	)
	for i, a := range items {
		if ctx.Err() != nil {
			for j := range out {
				out[j] = ErrCallCancelled
			}
			return out
		}
		w, err := resolve(a)
		if err != nil {
			out[i] = ServerError(err)
			continue
		}
		ws, idx = append(ws, w), append(idx, i)
	}
	if len(ws) > 0 {
		for k, err := range write(ws) {
			if err != nil {
				out[idx[k]] = ServerError(err)
			}
		}
	}
	return out
}
