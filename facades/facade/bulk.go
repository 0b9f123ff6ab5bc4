package facade

import (
	"context"

	"github.com/provisiond/provisiond/rpc/params"
)

// ErrorSetter is a pointer to a bulk result item that carries an error.
type ErrorSetter[R any] interface {
	*R
	SetError(*params.Error)
}

// Bulk runs fn for each item and returns one result per item, in the
// order of the request, with fn's error mapped by ServerError into the
// item's error. It is the one place a facade writes the per-item loop.
func Bulk[A any, R any, PR ErrorSetter[R]](items []A, fn func(A) (R, error)) []R {
	out := make([]R, len(items))
	for i, a := range items {
		r, err := fn(a)
		if err != nil {
			PR(&r).SetError(ServerError(err))
		}
		out[i] = r
	}
	return out
}

// BulkErrors runs fn for each entity and returns one ErrorResult per
// entity, in order, with each error mapped by ServerError.
func BulkErrors(ctx context.Context, args params.Entities, fn func(ctx context.Context, tag string) error) params.ErrorResults {
	return params.ErrorResults{Results: Bulk(args.Entities, func(e params.Entity) (params.ErrorResult, error) {
		return params.ErrorResult{}, fn(ctx, e.Tag)
	})}
}
