package robustness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/provisiond/provisiond/internal/robustness/checker"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// watcherRun holds a ModelAdmin WatchModel watcher on one daemon for the
// whole run, watching again (a new stream) whenever it ends: the daemon
// killed or stopped, its connection broken, the watcher reset.
type watcherRun struct {
	h    *harness
	d    *daemon
	name string

	mu      sync.Mutex
	streams []checker.Stream
}

// run watches until ctx ends. The caller's goroutine owns it.
func (wr *watcherRun) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := wr.stream(ctx); err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// stream makes one subscription and follows it until it ends; an error
// is a subscription that could not be made.
func (wr *watcherRun) stream(ctx context.Context) error {
	c, err := wr.h.dial(ctx, wr.d, false)
	if err != nil {
		return err
	}
	defer c.Close()
	st := checker.Stream{Watcher: wr.name, Daemon: wr.d.name, Start: wr.h.now()}
	var res params.StringsWatchResult
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err = c.Call(cctx, client.ModelAdminFacade, client.ModelAdminVersion, "", "WatchModel", params.ModelArgs{Model: "default"}, &res)
	cancel()
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return err
	}
	st.Started = wr.h.now()
	idx := wr.add(st)
	w := client.NewStringsWatcher(c, res.StringsWatcherId)
	for {
		next := wr.h.now()
		changes, err := w.Next(ctx)
		recv := wr.h.now()
		if err != nil {
			reason := checker.EndBroken
			switch {
			case ctx.Err() != nil:
				reason = checker.EndStopped
			case strings.Contains(err.Error(), "watcher reset"): // the feed was compacted past: the daemon reset its watchers
				reason = checker.EndReset
			}
			wr.mu.Lock()
			s := &wr.streams[idx]
			s.End, s.EndReason, s.EndErr = recv, reason, err.Error()
			wr.mu.Unlock()
			return nil
		}
		wr.mu.Lock()
		s := &wr.streams[idx]
		s.Deliveries = append(s.Deliveries, checker.Delivery{Next: next, Recv: recv, Entities: changes})
		wr.mu.Unlock()
	}
}

func (wr *watcherRun) add(st checker.Stream) int {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.streams = append(wr.streams, st)
	return len(wr.streams) - 1
}

// waitDelivered waits until a delivery naming entity arrives after
// (since the run's start), until ctx ends.
func (wr *watcherRun) waitDelivered(ctx context.Context, entity string, after int64) error {
	for {
		wr.mu.Lock()
		found := false
		for _, st := range wr.streams {
			for _, dl := range st.Deliveries {
				if dl.Recv > after && slices.Contains(dl.Entities, entity) {
					found = true
				}
			}
		}
		wr.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no delivery of %s after the last write: %w", wr.name, entity, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
