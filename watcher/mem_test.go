package watcher

import (
	"context"
	"fmt"
	"runtime"
	"testing"
)

// heapAfterGC is the bytes of live heap objects after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// retainedPerWatcher makes n watchers with make, each with a Next pending
// through NextAsync (a context that never ends, as the watchers facade's),
// and returns the heap they hold, bytes per watcher.
func retainedPerWatcher(n int, newWatcher func(i int) Stopper) float64 {
	ws := make([]Stopper, 0, n)
	before := heapAfterGC()
	for i := range n {
		ws = append(ws, newWatcher(i))
	}
	after := heapAfterGC()
	runtime.KeepAlive(ws)
	for _, w := range ws {
		_ = w.Stop()
	}
	return float64(after-before) / float64(n)
}

// TestWatcherMemory bounds what an agent's idle watcher holds in this
// package (the daemon's target is 0.5 KiB per watcher in all): a
// Notify or Strings watcher with a hub subscription of each index kind
// and a Next waiting. The bounds are the measured sizes with about a fifth
// of room (315, 457 and 457 bytes; 376, 508 and 521 before the watchers
// were 112 bytes instead of 160 and a Notify's waiting Next lost its
// closure; 856, 1,109 and 1,077 before the waiting Next lost its context
// callback and the hub its per-key maps), so a change that makes a
// waiting watcher hold a map, a context callback or a goroutine again
// fails it. A strings watcher that has delivered two ids holds 523 bytes
// (bound 630), 747 when its pending ids were a map that kept its table.
func TestWatcherMemory(t *testing.T) {
	const n = 2000
	done := func(error) {}
	cases := []struct {
		name string
		max  float64
		make func(h *Hub, i int) Stopper
	}{
		{"notify on a model's kind", 380, func(h *Hub, i int) Stopper {
			w := NewNotify()
			w.OnStop(h.Subscribe(Filter{Kind: "model-config", Model: "m"}, w.Sink()))
			w.NextAsync(context.Background(), done)
			return w
		}},
		{"strings on a parent's children", 550, func(h *Hub, i int) Stopper {
			w := NewStrings()
			w.OnStop(h.Subscribe(Filter{Kind: "machine", Model: "m", Parent: fmt.Sprint(i)}, w.Sink()))
			w.NextAsync(context.Background(), func([]string, error) {})
			return w
		}},
		{"strings that delivered two ids", 630, func(h *Hub, i int) Stopper {
			// An agent's container watcher after its machine got two
			// containers: the ids pending between Nexts are held in
			// an IDSet, not in a map that keeps its table.
			w := NewStrings()
			w.OnStop(h.Subscribe(Filter{Kind: "machine", Model: "m", Parent: fmt.Sprint(i)}, w.Sink()))
			w.Add(fmt.Sprint(i, "/lxd/0"), fmt.Sprint(i, "/lxd/1"))
			w.NextAsync(context.Background(), func([]string, error) {})
			w.NextAsync(context.Background(), func([]string, error) {})
			return w
		}},
		{"notify on one entity", 550, func(h *Hub, i int) Stopper {
			w := NewNotify()
			w.OnStop(h.Subscribe(Filter{Kind: "machine", Model: "m", ID: fmt.Sprint(i)}, w.Sink()))
			w.NextAsync(context.Background(), done)
			return w
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub()
			per := retainedPerWatcher(n, func(i int) Stopper { return tc.make(h, i) })
			t.Logf("%.0f bytes per watcher", per)
			if per > tc.max {
				t.Errorf("%.0f bytes per watcher, want at most %.0f", per, tc.max)
			}
			if got := h.Subscriptions(); got != 0 {
				t.Errorf("%d subscriptions left after Stop", got)
			}
		})
	}
}
