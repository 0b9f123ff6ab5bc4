package watcher

import (
	"sync"
	"time"
)

// Timer-driven watchers are built from two blocks, both on a Clock (so
// tests drive them with watchertest.FakeClock) and both stopped with
// their watcher: no timer outlives it.

// Batch delivers ids to a Strings watcher in batches: the first id added
// while no batch is open arms a timer of the quiet period on the clock,
// and every id added until it fires reaches the watcher as one change
// (Juju's start-times watcher waits so for a burst of agents to settle).
// Add never blocks, so a hub sink may call it.
type Batch struct {
	w     *Strings
	clock Clock
	quiet time.Duration

	mu      sync.Mutex // guards the fields below
	pending []string
	timer   Timer
	stopped bool
}

// NewBatch returns the batching of w over clock with the given quiet
// period. Stopping w stops a pending timer; ids added after are dropped.
func NewBatch(w *Strings, clock Clock, quiet time.Duration) *Batch {
	b := &Batch{w: w, clock: clock, quiet: quiet}
	w.OnStop(b.stop)
	return b
}

// Add adds ids to the open batch, opening one if none is.
func (b *Batch) Add(ids ...string) {
	if len(ids) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.pending = append(b.pending, ids...)
	if b.timer == nil {
		b.timer = b.clock.AfterFunc(b.quiet, b.flush)
	}
}

// flush closes the batch: its ids go to the watcher as one change.
func (b *Batch) flush() {
	b.mu.Lock()
	ids := b.pending
	b.pending, b.timer = nil, nil
	b.mu.Unlock()
	b.w.Add(ids...)
}

func (b *Batch) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	if b.timer != nil {
		b.timer.Stop()
	}
}

// NewTimerNotify returns a notify watcher driven by a timer alone: it has
// an event delay after it is made, and again delay after each event it
// delivers, not after each time it fires (Juju's machine error retry
// watcher: a provisioner that stops calling Next gets no more events and
// holds no timer's worth of them). The timer runs on clock; stopping the
// watcher stops it.
func NewTimerNotify(clock Clock, delay time.Duration) *Notify {
	w := NewNotify()
	var (
		mu      sync.Mutex // guards timer and stopped
		timer   Timer
		stopped bool
	)
	arm := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if timer != nil {
			timer.Stop()
		}
		timer = clock.AfterFunc(delay, w.Trigger)
	}
	w.OnDeliver(arm)
	w.OnStop(func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	})
	arm()
	return w
}
