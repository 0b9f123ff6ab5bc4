package facade

import (
	"context"

	"provisiond/rpc/params"
)

// BulkErrors runs fn for each entity and returns one ErrorResult per
// entity, in order, with each error mapped by ServerError. It is the only
// place a facade writes the per-item error loop.
func BulkErrors(ctx context.Context, args params.Entities, fn func(ctx context.Context, tag string) error) params.ErrorResults {
	out := params.ErrorResults{Results: make([]params.ErrorResult, len(args.Entities))}
	for i, e := range args.Entities {
		out.Results[i].Error = ServerError(fn(ctx, e.Tag))
	}
	return out
}
