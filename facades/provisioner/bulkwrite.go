package provisioner

import (
	"context"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
)

// bulkWrite is a bulk call whose writes commit in one state transaction
// (the "bulk calls apply their valid items in one transaction"):
// resolve checks each item and turns it into its write (an item it refuses
// keeps its error and is left out), and write applies the resolved ones
// with one bulk call of state, which returns their errors in order. Once
// ctx is done (the client has gone) nothing is written: each item gets
// facade.ErrCallCancelled, as facade.Bulk does.
func bulkWrite[A, W any](ctx context.Context, items []A, resolve func(A) (W, error), write func([]W) []error) params.ErrorResults {
	out := make([]params.ErrorResult, len(items))
	var (
		ws  []W
		idx []int
	)
	for i, a := range items {
		if ctx.Err() != nil {
			for j := range out {
				out[j].Error = facade.ErrCallCancelled
			}
			return params.ErrorResults{Results: out}
		}
		w, err := resolve(a)
		if err != nil {
			out[i].Error = facade.ServerError(err)
			continue
		}
		ws, idx = append(ws, w), append(idx, i)
	}
	if len(ws) > 0 {
		for k, err := range write(ws) {
			if err != nil {
				out[idx[k]].Error = facade.ServerError(err)
			}
		}
	}
	return params.ErrorResults{Results: out}
}
