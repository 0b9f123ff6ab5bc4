package watcher

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// ErrStopped is returned by Next on a stopped watcher. The rpc layer maps it
// to the code "stopped" ("watcher has been stopped").
var ErrStopped = errors.New("watcher has been stopped")

// lifecycle is what Notify and Strings share: the stop machinery and the
// functions (hub cancels, timers) to run when stopping.
type lifecycle struct {
	stopOnce sync.Once
	done     chan struct{}

	mu      sync.Mutex // guards the fields below
	err     error
	onStop  []func()
	stopped bool
}

func newLifecycle() lifecycle { return lifecycle{done: make(chan struct{})} }

// OnStop registers f to run once when the watcher stops (for example the
// cancel function of a hub subscription). If the watcher is already
// stopped, f runs at once.
func (l *lifecycle) OnStop(f func()) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		f()
		return
	}
	l.onStop = append(l.onStop, f)
	l.mu.Unlock()
}

// Kill stops the watcher with err: a blocked or later Next returns err
// instead of ErrStopped. A nil err is the same as Stop.
func (l *lifecycle) Kill(err error) {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.stopped = true
		l.err = err
		fs := l.onStop
		l.onStop = nil
		l.mu.Unlock()
		for i := len(fs) - 1; i >= 0; i-- {
			fs[i]()
		}
		close(l.done)
	})
}

// Stop stops the watcher: its subscriptions are cancelled and any blocked
// Next returns ErrStopped. Stop is idempotent and always returns nil.
func (l *lifecycle) Stop() error {
	l.Kill(nil)
	return nil
}

// Done is closed when the watcher has stopped.
func (l *lifecycle) Done() <-chan struct{} { return l.done }

// Err returns why the watcher stopped: ErrStopped after Stop, the error
// given to Kill, or nil while it runs.
func (l *lifecycle) Err() error {
	select {
	case <-l.done:
	default:
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	return ErrStopped
}

// Notify is a coalescing notify watcher: any number of Trigger calls
// between two Next calls give one event.
type Notify struct {
	lifecycle
	ch chan struct{}

	dmu       sync.Mutex // guards onDeliver
	onDeliver func()
}

// OnDeliver registers f to run after each event Next delivers (for
// timer-driven watchers that re-arm only once an event was consumed). f
// runs on the goroutine calling Next and must not block.
func (w *Notify) OnDeliver(f func()) {
	w.dmu.Lock()
	w.onDeliver = f
	w.dmu.Unlock()
}

func (w *Notify) delivered() {
	w.dmu.Lock()
	f := w.onDeliver
	w.dmu.Unlock()
	if f != nil {
		f()
	}
}

// NewNotify returns a running notify watcher with no pending event.
func NewNotify() *Notify {
	return &Notify{lifecycle: newLifecycle(), ch: make(chan struct{}, 1)}
}

// Trigger records a pending event. It never blocks.
func (w *Notify) Trigger() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Sink returns a hub sink that triggers w.
func (w *Notify) Sink() Sink { return func(uint64, Change) { w.Trigger() } }

// Next blocks until an event is pending and consumes it. It returns the
// stop error once the watcher is stopped, or ctx.Err() when ctx ends.
// A stopped watcher reports its stop even if an event was pending.
func (w *Notify) Next(ctx context.Context) error {
	select {
	case <-w.done:
		return w.Err()
	default:
	}
	select {
	case <-w.ch:
		w.delivered()
		return nil
	case <-w.done:
		return w.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Strings is a coalescing strings watcher: ids added between two Next calls
// are returned once, sorted and without duplicates.
type Strings struct {
	lifecycle
	sig chan struct{}

	pmu     sync.Mutex // guards pending
	pending map[string]struct{}
}

// NewStrings returns a running strings watcher with nothing pending.
func NewStrings() *Strings {
	return &Strings{lifecycle: newLifecycle(), sig: make(chan struct{}, 1), pending: make(map[string]struct{})}
}

// Add records ids as changed. It never blocks. Adding no ids does nothing.
func (w *Strings) Add(ids ...string) {
	if len(ids) == 0 {
		return
	}
	w.pmu.Lock()
	for _, id := range ids {
		w.pending[id] = struct{}{}
	}
	w.pmu.Unlock()
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

// Replace makes ids the only pending ids, dropping any others not yet
// delivered: a watcher of a value (a hash) delivers the latest one.
func (w *Strings) Replace(ids ...string) {
	w.pmu.Lock()
	clear(w.pending)
	w.pmu.Unlock()
	w.Add(ids...)
}

// Sink returns a hub sink that adds the changed entity's id to w.
func (w *Strings) Sink() Sink { return func(_ uint64, c Change) { w.Add(c.ID) } }

// Next blocks until ids are pending, then returns them sorted and clears
// the set. It returns the stop error once stopped, or ctx.Err().
func (w *Strings) Next(ctx context.Context) ([]string, error) {
	for {
		select {
		case <-w.done:
			return nil, w.Err()
		default:
		}
		select {
		case <-w.sig:
		case <-w.done:
			return nil, w.Err()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		w.pmu.Lock()
		ids := make([]string, 0, len(w.pending))
		for id := range w.pending {
			ids = append(ids, id)
		}
		clear(w.pending)
		w.pmu.Unlock()
		if len(ids) > 0 {
			slices.Sort(ids)
			return ids, nil
		}
	}
}
