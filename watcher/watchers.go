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
	// afterStop runs once after done is closed (the watcher types fail
	// their waiting Next calls in it).
	afterStop func()

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
		if l.afterStop != nil {
			l.afterStop()
		}
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

// waiter is one NextAsync call waiting for an event. Whoever removes it
// from its watcher's list, under the watcher's mutex, completes it: exactly
// once.
type waiter[T any] struct {
	done      func(T, error)
	cancelCtx func() bool // stops the context.AfterFunc
}

// waiters is a FIFO of waiting NextAsync calls; a client may (unusually)
// have more than one Next pending on a watcher, and each event goes to the
// oldest.
type waiters[T any] []*waiter[T]

func (ws *waiters[T]) pop() *waiter[T] {
	if len(*ws) == 0 {
		return nil
	}
	w := (*ws)[0]
	(*ws)[0] = nil
	*ws = (*ws)[1:]
	if len(*ws) == 0 {
		*ws = nil
	}
	return w
}

func (ws *waiters[T]) remove(w *waiter[T]) bool {
	i := slices.Index(*ws, w)
	if i < 0 {
		return false
	}
	*ws = slices.Delete(*ws, i, i+1)
	if len(*ws) == 0 {
		*ws = nil
	}
	return true
}

// complete ends w with v, err, first stopping its context callback.
func (w *waiter[T]) complete(v T, err error) {
	w.cancelCtx()
	w.done(v, err)
}

// Notify is a coalescing notify watcher: any number of Trigger calls
// between two Next calls give one event.
type Notify struct {
	lifecycle

	mu        sync.Mutex // guards the fields below
	pending   bool
	closed    bool // stopped: waiters have been failed, later ones fail at once
	waiting   waiters[struct{}]
	onDeliver func()
}

// OnDeliver registers f to run after each event Next delivers (for
// timer-driven watchers that re-arm only once an event was consumed). f
// runs on the goroutine that delivered the event (the one calling Next, or
// the one calling Trigger when a Next was waiting), with no lock of the
// watcher held; it must not block.
func (w *Notify) OnDeliver(f func()) {
	w.mu.Lock()
	w.onDeliver = f
	w.mu.Unlock()
}

// NewNotify returns a running notify watcher with no pending event.
func NewNotify() *Notify {
	w := &Notify{lifecycle: newLifecycle()}
	w.afterStop = w.failWaiters
	return w
}

// Trigger records a pending event, or hands it to the oldest waiting
// Next. It never blocks (a waiting NextAsync's done must not block).
func (w *Notify) Trigger() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	wt := w.waiting.pop()
	if wt == nil {
		w.pending = true
		w.mu.Unlock()
		return
	}
	f := w.onDeliver
	w.mu.Unlock()
	wt.complete(struct{}{}, nil)
	if f != nil {
		f()
	}
}

// Sink returns a hub sink that triggers w.
func (w *Notify) Sink() Sink { return func(uint64, Change) { w.Trigger() } }

// NextAsync consumes the next event without blocking: done(nil) is called
// once an event is pending (at once if one already is), done(stop error)
// once the watcher is stopped, done(ctx.Err()) when ctx ends, whichever
// comes first, exactly once. done may run on the calling goroutine (before
// NextAsync returns) or on the goroutine that triggered, stopped or
// cancelled; it must not block. A stopped watcher reports its stop even if
// an event was pending. No goroutine waits on behalf of the call.
func (w *Notify) NextAsync(ctx context.Context, done func(error)) {
	w.mu.Lock()
	if w.readyLocked(ctx, done) {
		return
	}
	w.mu.Unlock()
	// Wait: register the context callback first so that the waiter is
	// listed only with its cancel function set, then look again.
	wt := &waiter[struct{}]{done: func(_ struct{}, err error) { done(err) }}
	wt.cancelCtx = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		ok := w.waiting.remove(wt)
		w.mu.Unlock()
		if ok {
			done(ctx.Err())
		}
	})
	w.mu.Lock()
	if w.readyLocked(ctx, done) {
		wt.cancelCtx()
		return
	}
	w.waiting = append(w.waiting, wt)
	w.mu.Unlock()
}

// readyLocked completes a Next that need not wait (stopped, ctx ended, an
// event pending), unlocking w.mu, and reports true; else it returns false
// with w.mu still held.
func (w *Notify) readyLocked(ctx context.Context, done func(error)) bool {
	switch {
	case w.closed:
		w.mu.Unlock()
		done(w.Err())
	case ctx.Err() != nil:
		w.mu.Unlock()
		done(ctx.Err())
	case w.pending:
		w.pending = false
		f := w.onDeliver
		w.mu.Unlock()
		done(nil)
		if f != nil {
			f()
		}
	default:
		return false
	}
	return true
}

// Next blocks until an event is pending and consumes it. It returns the
// stop error once the watcher is stopped, or ctx.Err() when ctx ends.
func (w *Notify) Next(ctx context.Context) error {
	ch := make(chan error, 1)
	w.NextAsync(ctx, func(err error) { ch <- err })
	return <-ch
}

func (w *Notify) failWaiters() {
	w.mu.Lock()
	w.closed = true
	ws := w.waiting
	w.waiting = nil
	w.mu.Unlock()
	err := w.Err()
	for _, wt := range ws {
		wt.complete(struct{}{}, err)
	}
}

// Strings is a coalescing strings watcher: ids added between two Next calls
// are returned once, sorted and without duplicates.
type Strings struct {
	lifecycle

	mu      sync.Mutex // guards the fields below
	pending map[string]struct{}
	closed  bool
	waiting waiters[[]string]
}

// NewStrings returns a running strings watcher with nothing pending.
func NewStrings() *Strings {
	w := &Strings{lifecycle: newLifecycle(), pending: make(map[string]struct{})}
	w.afterStop = w.failWaiters
	return w
}

// Add records ids as changed, handing them to the oldest waiting Next if
// there is one. It never blocks. Adding no ids does nothing.
func (w *Strings) Add(ids ...string) {
	if len(ids) == 0 {
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	for _, id := range ids {
		w.pending[id] = struct{}{}
	}
	w.deliverLocked()
}

// deliverLocked hands the pending ids to the oldest waiter, if any, and
// unlocks w.mu.
func (w *Strings) deliverLocked() {
	if len(w.pending) == 0 || len(w.waiting) == 0 {
		w.mu.Unlock()
		return
	}
	wt := w.waiting.pop()
	ids := w.takeLocked()
	w.mu.Unlock()
	wt.complete(ids, nil)
}

func (w *Strings) takeLocked() []string {
	ids := make([]string, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	clear(w.pending)
	slices.Sort(ids)
	return ids
}

// Replace makes ids the only pending ids, dropping any others not yet
// delivered: a watcher of a value (a hash) delivers the latest one.
func (w *Strings) Replace(ids ...string) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	clear(w.pending)
	for _, id := range ids {
		w.pending[id] = struct{}{}
	}
	w.deliverLocked()
}

// Sink returns a hub sink that adds the changed entity's id to w.
func (w *Strings) Sink() Sink { return func(_ uint64, c Change) { w.Add(c.ID) } }

// NextAsync takes the pending ids without blocking: done(ids, nil) is
// called once ids are pending (at once if some already are), sorted and
// without duplicates, and the set is cleared; done(nil, stop error) once
// the watcher is stopped; done(nil, ctx.Err()) when ctx ends; exactly
// once. done may run on the calling goroutine or on the one that added,
// stopped or cancelled; it must not block. No goroutine waits on behalf of
// the call.
func (w *Strings) NextAsync(ctx context.Context, done func([]string, error)) {
	w.mu.Lock()
	if w.readyLocked(ctx, done) {
		return
	}
	w.mu.Unlock()
	wt := &waiter[[]string]{done: done}
	wt.cancelCtx = context.AfterFunc(ctx, func() {
		w.mu.Lock()
		ok := w.waiting.remove(wt)
		w.mu.Unlock()
		if ok {
			done(nil, ctx.Err())
		}
	})
	w.mu.Lock()
	if w.readyLocked(ctx, done) {
		wt.cancelCtx()
		return
	}
	w.waiting = append(w.waiting, wt)
	w.mu.Unlock()
}

// readyLocked completes a Next that need not wait, unlocking w.mu, and
// reports true; else it returns false with w.mu still held.
func (w *Strings) readyLocked(ctx context.Context, done func([]string, error)) bool {
	switch {
	case w.closed:
		w.mu.Unlock()
		done(nil, w.Err())
	case ctx.Err() != nil:
		w.mu.Unlock()
		done(nil, ctx.Err())
	case len(w.pending) > 0:
		ids := w.takeLocked()
		w.mu.Unlock()
		done(ids, nil)
	default:
		return false
	}
	return true
}

// Next blocks until ids are pending, then returns them sorted and clears
// the set. It returns the stop error once stopped, or ctx.Err().
func (w *Strings) Next(ctx context.Context) ([]string, error) {
	type result struct {
		ids []string
		err error
	}
	ch := make(chan result, 1)
	w.NextAsync(ctx, func(ids []string, err error) { ch <- result{ids, err} })
	r := <-ch
	return r.ids, r.err
}

func (w *Strings) failWaiters() {
	w.mu.Lock()
	w.closed = true
	ws := w.waiting
	w.waiting = nil
	w.mu.Unlock()
	err := w.Err()
	for _, wt := range ws {
		wt.complete(nil, err)
	}
}
