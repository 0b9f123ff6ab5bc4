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
// order of the request, with fn's error mapped by the error table into the
// item's error (an internal error is logged with the call ctx belongs to,
// see Context.ServerError). It is the one place a facade writes the
// per-item loop.
// ctx is the call's: once it is done (the client has gone) the remaining
// items are not worked on; each gets the error ErrCallCancelled, which no
// client will read.
func Bulk[A any, R any, PR ErrorSetter[R]](ctx context.Context, items []A, fn func(A) (R, error)) []R {
	c := ContextOf(ctx)
	out := make([]R, len(items))
	for i, a := range items {
		if ctx.Err() != nil {
			for j := i; j < len(out); j++ {
				PR(&out[j]).SetError(ErrCallCancelled)
			}
			break
		}
		r, err := fn(a)
		if err != nil {
			PR(&r).SetError(c.ServerError(err))
		}
		out[i] = r
	}
	return out
}

// ErrCallCancelled is the error of a bulk item left undone because the
// call's connection ended.
var ErrCallCancelled = &params.Error{Message: "connection is shut down"}

// ErrorOnly adapts fn, a per-item function that only reports an error, to
// Bulk: params.ErrorResults{Results: Bulk(ctx, items, ErrorOnly(fn))}.
func ErrorOnly[A any](fn func(A) error) func(A) (params.ErrorResult, error) {
	return func(a A) (params.ErrorResult, error) { return params.ErrorResult{}, fn(a) }
}
