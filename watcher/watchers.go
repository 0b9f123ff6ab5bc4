package watcher

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrStopped is returned by Next on a stopped watcher. The rpc layer maps it
// to the code "stopped" ("watcher has been stopped").
var ErrStopped = errors.New("watcher has been stopped")

// lifecycle is what Notify and Strings share: the stop machinery and the
// functions (hub cancels, timers) to run when stopping. What few watchers
// need (a Kill error, a Done channel) is in end, made only then: an
// agent's watcher is stopped through Resources, with no error, and nobody
// waits on its channel. The fields are ordered to leave no padding (a
// watcher is 112 bytes; 160 with a word each for the error and the
// channel and a mutex's padding).
type lifecycle struct {
	stopOnce   sync.Once
	revisioned atomic.Bool // SetRevisioned was called

	mu      sync.Mutex // guards the fields below
	onStop  []func()
	end     *lifecycleEnd
	stopped bool // kill began: OnStop runs its function at once
	closed  bool // kill ended: the OnStop functions have run
}

// lifecycleEnd is what a lifecycle holds for the few watchers that need
// it.
type lifecycleEnd struct {
	err  error         // given to Kill
	done chan struct{} // made by Done; closed when closed is set
}

// endLocked returns l.end, made if need be; l.mu is held.
func (l *lifecycle) endLocked() *lifecycleEnd {
	if l.end == nil {
		l.end = new(lifecycleEnd)
	}
	return l.end
}

// SetRevisioned says that every change reaches w as it is published, in
// its publisher's call (no timer, no batch in between), so that an event
// taken once the publisher has finished revision r holds every change up
// to r: its events may report revisions to a client that resumes from
// them (the rpc facade's Next).
func (l *lifecycle) SetRevisioned() { l.revisioned.Store(true) }

// Revisioned reports whether SetRevisioned was called.
func (l *lifecycle) Revisioned() bool { return l.revisioned.Load() }

// closedChan is the Done channel of a watcher asked for it only after it
// stopped.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

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

// kill stops the watcher with err once: it runs the OnStop functions,
// newest first, marks the watcher stopped (Done, Err) and then runs after
// (the watcher types fail their waiting Next calls in it). A concurrent
// second kill waits for the first to end.
func (l *lifecycle) kill(err error, after func()) {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		l.stopped = true
		if err != nil {
			l.endLocked().err = err
		}
		fs := l.onStop
		l.onStop = nil
		l.mu.Unlock()
		for i := len(fs) - 1; i >= 0; i-- {
			fs[i]()
		}
		l.mu.Lock()
		l.closed = true
		var done chan struct{}
		if l.end != nil {
			done = l.end.done
		}
		l.mu.Unlock()
		if done != nil {
			close(done)
		}
		after()
	})
}

// Done is closed when the watcher has stopped.
func (l *lifecycle) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end == nil || l.end.done == nil {
		if l.closed {
			return closedChan
		}
		l.endLocked().done = make(chan struct{})
	}
	return l.end.done
}

// Err returns why the watcher stopped: ErrStopped after Stop, the error
// given to Kill, or nil while it runs.
func (l *lifecycle) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.closed:
		return nil
	case l.end != nil && l.end.err != nil:
		return l.end.err
	}
	return ErrStopped
}

// doneFunc is the function a NextAsync call is completed with, as its
// caller gave it: Notify's func(error) is converted to notifyDone, not
// wrapped in a closure (16 bytes each waiting Next held).
type doneFunc[T any] interface {
	call(v T, err error)
}

// notifyDone is Notify's done function.
type notifyDone func(error)

func (f notifyDone) call(_ struct{}, err error) { f(err) }

// stringsDone is Strings' done function.
type stringsDone func([]string, error)

func (f stringsDone) call(ids []string, err error) { f(ids, err) }

// waiter is one NextAsync call waiting for an event. Whoever removes it
// from its queue, under the queue's mutex, completes it: exactly once.
type waiter[T any, D doneFunc[T]] struct {
	done D
	// cancelCtx stops the context.AfterFunc; nil for a context that never
	// ends. It is set before the waiter is queued.
	cancelCtx func() bool
	seq       uint32 // tells the waiters of one queue apart (of the 2^32 last)
}

// complete ends w with v, err, first stopping its context callback.
func (w waiter[T, D]) complete(v T, err error) {
	if w.cancelCtx != nil {
		w.cancelCtx()
	}
	w.done.call(v, err)
}

// waitQueue is the NextAsync machinery Notify and Strings share: the FIFO
// of waiting calls (a client may, unusually, have more than one Next
// pending on a watcher; each event goes to the oldest) and the stopped
// flag, under mu, which also guards the watcher's pending state. The
// waiters are kept by value and the queue's array is reused, so a Next
// that waits allocates nothing here once the watcher has waited before.
type waitQueue[T any, D doneFunc[T]] struct {
	mu     sync.Mutex
	seq    uint32
	closed bool // stopped: waiters have been failed, later ones fail at once
	// flag is the watcher's own, guarded by mu: Notify's pending event,
	// Strings' reset. It is here, in what would be padding, so that a
	// watcher is 16 bytes smaller.
	flag    bool
	waiting []waiter[T, D]
}

// take is a watcher's way of consuming its pending state, called with
// mu held: the value to deliver, a function to run once it is delivered
// (nil for none), and whether anything was pending.
type take[T any] func() (v T, after func(), ok bool)

// next is NextAsync: it completes done at once if the watcher is stopped
// (with stopErr), ctx has ended or take finds something pending, else it
// queues done until the watcher delivers, stops or ctx ends. A ctx that
// can never end (Done returns nil) registers nothing: the rpc facade's
// waiting Next ends when its watcher is stopped with the connection.
func (q *waitQueue[T, D]) next(ctx context.Context, stopErr func() error, take take[T], done D) {
	q.mu.Lock()
	if q.readyLocked(ctx, stopErr, take, done) {
		return
	}
	q.seq++
	seq := q.seq
	if ctx.Done() == nil {
		q.waiting = append(q.waiting, waiter[T, D]{done: done, seq: seq})
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	// Wait: register the context callback first so that the waiter is
	// queued only with its cancel function set, then look again.
	cancel := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		i := slices.IndexFunc(q.waiting, func(w waiter[T, D]) bool { return w.seq == seq })
		if i >= 0 {
			q.waiting = slices.Delete(q.waiting, i, i+1)
		}
		q.mu.Unlock()
		if i >= 0 {
			var zero T
			done.call(zero, ctx.Err())
		}
	})
	q.mu.Lock()
	if q.readyLocked(ctx, stopErr, take, done) {
		cancel()
		return
	}
	q.waiting = append(q.waiting, waiter[T, D]{done: done, cancelCtx: cancel, seq: seq})
	q.mu.Unlock()
}

// readyLocked completes a call that need not wait, unlocking q.mu, and
// reports true; else it returns false with q.mu still held.
func (q *waitQueue[T, D]) readyLocked(ctx context.Context, stopErr func() error, take take[T], done D) bool {
	var zero T
	switch {
	case q.closed:
		q.mu.Unlock()
		done.call(zero, stopErr())
	case ctx.Err() != nil:
		q.mu.Unlock()
		done.call(zero, ctx.Err())
	default:
		v, after, ok := take()
		if !ok {
			return false
		}
		q.mu.Unlock()
		done.call(v, nil)
		if after != nil {
			after()
		}
	}
	return true
}

// popLocked removes the oldest waiter, if any; q.mu must be held.
func (q *waitQueue[T, D]) popLocked() (waiter[T, D], bool) {
	if len(q.waiting) == 0 {
		return waiter[T, D]{}, false
	}
	wt := q.waiting[0]
	q.waiting = slices.Delete(q.waiting, 0, 1)
	return wt, true
}

// fail marks the queue stopped and completes every waiter with err.
func (q *waitQueue[T, D]) fail(err error) {
	q.mu.Lock()
	q.closed = true
	ws := q.waiting
	q.waiting = nil
	q.mu.Unlock()
	var zero T
	for _, wt := range ws {
		wt.complete(zero, err)
	}
}

// Notify is a coalescing notify watcher: any number of Trigger calls
// between two Next calls give one event.
type Notify struct {
	lifecycle
	q waitQueue[struct{}, notifyDone] // q.flag: an event is pending

	onDeliver func() // guarded by q.mu
}

// OnDeliver registers f to run after each event Next delivers (for
// timer-driven watchers that re-arm only once an event was consumed). f
// runs on the goroutine that delivered the event (the one calling Next, or
// the one calling Trigger when a Next was waiting), with no lock of the
// watcher held; it must not block.
func (w *Notify) OnDeliver(f func()) {
	w.q.mu.Lock()
	w.onDeliver = f
	w.q.mu.Unlock()
}

// NewNotify returns a running notify watcher with no pending event.
func NewNotify() *Notify {
	return &Notify{}
}

// Kill stops the watcher with err: a blocked or later Next returns err
// instead of ErrStopped. A nil err is the same as Stop.
func (w *Notify) Kill(err error) { w.kill(err, w.failWaiters) }

// Stop stops the watcher: its subscriptions are cancelled and any blocked
// Next returns ErrStopped. Stop is idempotent and always returns nil.
func (w *Notify) Stop() error {
	w.Kill(nil)
	return nil
}

func (w *Notify) failWaiters() { w.q.fail(w.Err()) }

// Trigger records a pending event, or hands it to the oldest waiting
// Next. It never blocks (a waiting NextAsync's done must not block).
func (w *Notify) Trigger() {
	w.q.mu.Lock()
	if w.q.closed {
		w.q.mu.Unlock()
		return
	}
	wt, ok := w.q.popLocked()
	if !ok {
		w.q.flag = true // pending
		w.q.mu.Unlock()
		return
	}
	f := w.onDeliver
	w.q.mu.Unlock()
	wt.complete(struct{}{}, nil)
	if f != nil {
		f()
	}
}

// TakePending consumes a pending event without waiting, reporting
// whether there was one (false once the watcher is stopped).
func (w *Notify) TakePending() bool {
	w.q.mu.Lock()
	defer w.q.mu.Unlock()
	if w.q.closed {
		return false
	}
	_, _, ok := w.takeLocked()
	return ok
}

// Sink returns a hub sink that triggers w (on a reset too: Hub.Reset).
func (w *Notify) Sink() Sink { return func(uint64, Change) { w.Trigger() } }

// Reset is what a reset (Hub.Reset) does to a notify watcher: it
// triggers (whatever it missed, its client reads the state again).
func (w *Notify) Reset() { w.Trigger() }

// Resetter is a watcher a reset reaches (Notify and Strings): the stop
// hook its subscriptions are cancelled with, and what a reset does.
type Resetter interface {
	OnStop(f func())
	Reset()
}

// NextAsync consumes the next event without blocking: done(nil) is called
// once an event is pending (at once if one already is), done(stop error)
// once the watcher is stopped, done(ctx.Err()) when ctx ends, whichever
// comes first, exactly once. done may run on the calling goroutine (before
// NextAsync returns) or on the goroutine that triggered, stopped or
// cancelled; it must not block. A stopped watcher reports its stop even if
// an event was pending. No goroutine waits on behalf of the call.
func (w *Notify) NextAsync(ctx context.Context, done func(error)) {
	w.q.next(ctx, w.Err, w.takeLocked, notifyDone(done))
}

func (w *Notify) takeLocked() (struct{}, func(), bool) {
	if !w.q.flag { // pending
		return struct{}{}, nil, false
	}
	w.q.flag = false
	return struct{}{}, w.onDeliver, true
}

// Next blocks until an event is pending and consumes it. It returns the
// stop error once the watcher is stopped, or ctx.Err() when ctx ends.
func (w *Notify) Next(ctx context.Context) error {
	ch := make(chan error, 1)
	w.NextAsync(ctx, func(err error) { ch <- err })
	return <-ch
}

// Strings is a coalescing strings watcher: ids added between two Next calls
// are returned once, sorted and without duplicates.
type Strings struct {
	lifecycle
	q waitQueue[[]string, stringsDone] // q.flag: Reset was called

	pending IDSet // guarded by q.mu
}

// NewStrings returns a running strings watcher with nothing pending.
func NewStrings() *Strings {
	return &Strings{}
}

// Kill stops the watcher with err: a blocked or later Next returns err
// instead of ErrStopped. A nil err is the same as Stop.
func (w *Strings) Kill(err error) { w.kill(err, w.failWaiters) }

// Stop stops the watcher: its subscriptions are cancelled and any blocked
// Next returns ErrStopped. Stop is idempotent and always returns nil.
func (w *Strings) Stop() error {
	w.Kill(nil)
	return nil
}

func (w *Strings) failWaiters() { w.q.fail(w.Err()) }

// Add records ids as changed, handing them to the oldest waiting Next if
// there is one. It never blocks. Adding no ids does nothing.
func (w *Strings) Add(ids ...string) {
	if len(ids) == 0 {
		return
	}
	w.update(false, ids)
}

// Replace makes ids the only pending ids, dropping any others not yet
// delivered: a watcher of a value (a hash) delivers the latest one.
func (w *Strings) Replace(ids ...string) { w.update(true, ids) }

// update adds ids to the pending set (emptied first if replace) and hands
// the set to the oldest waiting Next, if any.
func (w *Strings) update(replace bool, ids []string) {
	w.q.mu.Lock()
	if w.q.closed {
		w.q.mu.Unlock()
		return
	}
	if replace {
		w.pending.Clear()
	}
	for _, id := range ids {
		w.pending.Add(id)
	}
	if w.pending.Len() == 0 || len(w.q.waiting) == 0 {
		w.q.mu.Unlock()
		return
	}
	wt, _ := w.q.popLocked()
	got, _, _ := w.takeLocked()
	w.q.mu.Unlock()
	wt.complete(got, nil)
}

// TakePending takes the pending ids, sorted, without waiting: none when
// nothing is pending or the watcher is stopped.
func (w *Strings) TakePending() []string {
	w.q.mu.Lock()
	defer w.q.mu.Unlock()
	if w.q.closed {
		return nil
	}
	ids, _, _ := w.takeLocked()
	return ids
}

// takeLocked takes the pending ids, sorted, if there are any.
func (w *Strings) takeLocked() ([]string, func(), bool) {
	n := w.pending.Len()
	if n == 0 {
		return nil, nil, false
	}
	ids := w.pending.AppendSorted(make([]string, 0, n))
	w.pending.Clear()
	return ids, nil, true
}

// Sink returns a hub sink that adds the changed entity's id to w, or
// resets w on a reset (Hub.Reset).
func (w *Strings) Sink() Sink {
	return func(_ uint64, c Change) {
		if c.IsReset() {
			w.Reset()
			return
		}
		w.Add(c.ID)
	}
}

// Reset is what a reset (Hub.Reset) does to a strings watcher, which
// cannot say which ids it missed: every waiting and later Next fails
// with ErrReset, so its client watches again and reads a new initial
// snapshot. The watcher keeps its subscriptions until it is stopped (its
// client stops it, or its connection ends), delivering nothing more. It
// never blocks and may be called from a sink.
func (w *Strings) Reset() {
	w.q.mu.Lock()
	if w.q.closed {
		w.q.mu.Unlock()
		return
	}
	w.q.flag = true // reset
	w.q.mu.Unlock()
	w.q.fail(ErrReset)
}

// stopErr is what Next returns once the queue is closed: ErrReset after a
// reset, else why the watcher stopped.
func (w *Strings) stopErr() error {
	w.q.mu.Lock()
	reset := w.q.flag
	w.q.mu.Unlock()
	if reset {
		return ErrReset
	}
	return w.Err()
}

// NextAsync takes the pending ids without blocking: done(ids, nil) is
// called once ids are pending (at once if some already are), sorted and
// without duplicates, and the set is cleared; done(nil, stop error) once
// the watcher is stopped; done(nil, ctx.Err()) when ctx ends; exactly
// once. done may run on the calling goroutine or on the one that added,
// stopped or cancelled; it must not block. No goroutine waits on behalf of
// the call.
func (w *Strings) NextAsync(ctx context.Context, done func([]string, error)) {
	w.q.next(ctx, w.stopErr, w.takeLocked, done)
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
