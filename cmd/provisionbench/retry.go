package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// againAttempts bounds the tries of one fixture call answered try again:
// with backoff's 5 s cap, about two minutes of a store that does not
// answer. An agent's calls are not bounded (an agent keeps trying).
const againAttempts = 30

// retryAgain makes call until it is not answered try again (the daemon's
// store did not answer in time), after a backoff each time, as an agent
// does. call is given the indices of the items still to make, 0..n-1 at
// first; it returns nil when done, another error to end, or try again:
// with the indices of the items answered try again (a bulk call's, which
// alone are made again: no watcher is opened twice), or with none when
// the call as a whole was answered so (made again over the same items).
// again, if not nil, is told of each try again: the items, or 1 for a
// whole call. attempts bounds the calls (0: until ctx ends); after the
// last, its try again error is returned.
func retryAgain(ctx context.Context, n, attempts int, again func(int64), call func(idx []int) ([]int, error)) error {
	idx := make([]int, n)
	for j := range idx {
		idx[j] = j
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, backoff(attempt)); err != nil {
				return err
			}
		}
		failed, err := call(idx)
		if !client.IsCode(err, params.CodeTryAgain) {
			return err
		}
		if failed != nil {
			idx = failed
		}
		if again != nil {
			again(int64(max(len(failed), 1)))
		}
		if attempts > 0 && attempt+1 == attempts {
			return err
		}
	}
}

// callAgain calls fn until it is not answered try again, at most
// againAttempts times (the fixture's calls).
func callAgain(ctx context.Context, fn func() error) error {
	return retryAgain(ctx, 1, againAttempts, nil, func([]int) ([]int, error) { return nil, fn() })
}

// bulkAgain makes a bulk call of n items (call takes the items' indices)
// until none is answered try again, making only those again, at most
// againAttempts times; another error, of the call or an item, ends it.
func bulkAgain(ctx context.Context, n int, call func(idx []int) ([]params.ErrorResult, error)) error {
	return retryAgain(ctx, n, againAttempts, nil, func(idx []int) ([]int, error) {
		res, err := call(idx)
		if err != nil {
			return nil, err
		}
		if len(res) != len(idx) {
			return nil, fmt.Errorf("%d results for %d", len(res), len(idx))
		}
		return againItems(idx, len(res), func(k int) error {
			if res[k].Error == nil {
				return nil
			}
			return res[k].Error
		})
	})
}

// againItems sorts the n results of a bulk call over idx: err(k) is the
// k-th item's error. It returns the indices of the items answered try
// again with the last such error, or the first other error.
func againItems(idx []int, n int, err func(k int) error) ([]int, error) {
	var again []int
	var last error
	for k := range n {
		switch e := err(k); {
		case e == nil:
		case client.IsCode(e, params.CodeTryAgain):
			again, last = append(again, idx[k]), e
		default:
			return nil, e
		}
	}
	return again, last
}

// backoff is the jittered exponential backoff of a reconnecting agent:
// a uniformly random wait up to min(5 s, 100 ms x 2^attempt).
func backoff(attempt int) time.Duration {
	ceil := 100 * time.Millisecond << min(attempt, 6)
	ceil = min(ceil, 5*time.Second)
	return time.Duration(rand.Int64N(int64(ceil))) + time.Millisecond
}
