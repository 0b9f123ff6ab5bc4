package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/rpc/params"
)

// stopTimeout bounds the Stop call a NotifyWatch or StringsWatch makes on
// the server when it is stopped.
const stopTimeout = 10 * time.Second

// NotifyWatch is a running notify watcher, as Juju's api/watcher gives
// them to workers: a goroutine of its own calls NotifyWatcher.Next and
// sends one value on Changes for each event. The first value is sent at
// once, standing for the watched thing's current state (the Watch call
// consumed the server's initial event); after that, each value means "it
// changed since the last value you received" (changes between two
// receives coalesce on the server).
//
// The watch owns its goroutine: Stop ends it, stops the watcher on the
// server and waits until the goroutine has returned. Changes is closed
// when the watch ends, by Stop or because the watcher or the connection
// failed; Err then says why. Stop must be called in every case (it is
// idempotent). The methods are safe for concurrent use.
type NotifyWatch struct {
	watch
	out chan struct{}
	rev atomic.Uint64 // Revision; 0: not reported
}

// StringsWatch is a running strings watcher: a goroutine of its own calls
// StringsWatcher.Next and sends the changed ids on Changes. The first
// value is the initial changes the Watch call returned (possibly empty);
// after that, each value lists the ids that changed since the last one
// received. Stop, Err and the goroutine's ownership are as for
// NotifyWatch.
type StringsWatch struct {
	watch
	out chan []string
	rev atomic.Uint64 // Revision; 0: not reported
}

// watch is what NotifyWatch and StringsWatch share: the goroutine's
// lifetime and the reason it ended.
type watch struct {
	c        *Conn
	facade   string
	id       string
	ctx      context.Context // cancelled by Stop: ends a waiting Next
	cancel   context.CancelFunc
	stop     chan struct{} // closed by Stop
	done     chan struct{} // closed when the goroutine has returned
	stopOnce sync.Once
	stopErr  error

	mu  sync.Mutex
	err error
}

func newWatch(c *Conn, facade, id string) watch {
	ctx, cancel := context.WithCancel(context.Background())
	return watch{c: c, facade: facade, id: id, ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{})}
}

// NewNotifyWatch starts a NotifyWatch for the watcher a Watch* call
// returned in res (one item of a bulk result, or a single result). It
// returns res.Error when the result carries one.
func NewNotifyWatch(c *Conn, res params.NotifyWatchResult) (*NotifyWatch, error) {
	if res.Error != nil {
		return nil, res.Error
	}
	if res.NotifyWatcherId == "" {
		return nil, errors.New("client: notify watch result without a watcher id")
	}
	return NewNotifyWatchFrom(c, res, 0, false)
}

// NewNotifyWatchFrom is NewNotifyWatch for a watcher opened with
// Conn.CallFrom, whose reply carried rev: its events report revisions, and
// Revision says up to which one the values received cover every change.
// Resumed (opened from a revision other than 0) and reporting revisions,
// no value is sent at once: the first is sent when the watched thing
// changed after the revision resumed from (the daemon left the watcher
// with an event pending), and none until it changes otherwise. With rev 0
// (the watcher reports none, and so did not resume) it is
// NewNotifyWatch.
func NewNotifyWatchFrom(c *Conn, res params.NotifyWatchResult, rev uint64, resumed bool) (*NotifyWatch, error) {
	if res.Error != nil {
		return nil, res.Error
	}
	if res.NotifyWatcherId == "" {
		return nil, errors.New("client: notify watch result without a watcher id")
	}
	w := &NotifyWatch{watch: newWatch(c, "NotifyWatcher", res.NotifyWatcherId), out: make(chan struct{})}
	resumed = resumed && rev > 0
	if resumed {
		// Nothing to send yet, and nothing up to rev to send.
		w.rev.Store(rev)
	}
	go w.loop(rev, !resumed)
	return w, nil
}

// Revision is the revision up to which the values received from Changes
// cover every change (for a resumed watch, also before the first value):
// a watch opened again from it, on this daemon or another of the
// controller, sends a value only if something changed after it. 0 for a
// watcher that reports no revisions.
func (w *NotifyWatch) Revision() uint64 { return w.rev.Load() }

// NewStringsWatch starts a StringsWatch for the watcher a Watch* call
// returned in res; res.Changes are its first value. It returns res.Error
// when the result carries one.
func NewStringsWatch(c *Conn, res params.StringsWatchResult) (*StringsWatch, error) {
	return NewStringsWatchFrom(c, res, 0)
}

// NewStringsWatchFrom is NewStringsWatch for a watcher opened with
// Conn.CallFrom, whose reply carried rev: its events report revisions, and
// Revision says up to which one the values received cover every change.
// With rev 0 (the watcher reports none) it is NewStringsWatch.
func NewStringsWatchFrom(c *Conn, res params.StringsWatchResult, rev uint64) (*StringsWatch, error) {
	if res.Error != nil {
		return nil, res.Error
	}
	if res.StringsWatcherId == "" {
		return nil, errors.New("client: strings watch result without a watcher id")
	}
	w := &StringsWatch{watch: newWatch(c, "StringsWatcher", res.StringsWatcherId), out: make(chan []string)}
	initial := res.Changes
	if initial == nil {
		initial = []string{}
	}
	go w.loop(initial, rev)
	return w, nil
}

// Revision is the revision up to which the values received from Changes
// cover every change the watcher reports: a watch opened again with
// Conn.CallFrom from it, on this daemon or another of the controller,
// reports what changed after it (docs/history.md, "Resuming a watch").
// 0 for a watcher that reports no revisions.
func (w *StringsWatch) Revision() uint64 { return w.rev.Load() }

// Changes delivers the watcher's events; it is closed when the watch ends.
func (w *NotifyWatch) Changes() <-chan struct{} { return w.out }

// Changes delivers the changed ids; it is closed when the watch ends.
func (w *StringsWatch) Changes() <-chan []string { return w.out }

// loop sends the initial value (unless not initial), then one per Next.
func (w *NotifyWatch) loop(rev uint64, initial bool) {
	defer close(w.done)
	defer close(w.out)
	nw := NewNotifyWatcher(w.c, w.id)
	for {
		if initial {
			// As StringsWatch.loop: Revision is the value's once sent.
			prev := w.rev.Swap(rev)
			if !deliver(&w.watch, w.out, struct{}{}) {
				w.rev.Store(prev)
				return
			}
		}
		initial = true
		var err error
		if rev > 0 {
			rev, err = nw.NextRevision(w.ctx)
		} else {
			err = nw.Next(w.ctx)
		}
		if err != nil {
			w.fail(err)
			return
		}
	}
}

func (w *StringsWatch) loop(changes []string, rev uint64) {
	defer close(w.done)
	defer close(w.out)
	sw := NewStringsWatcher(w.c, w.id)
	for {
		// Revision is the value's once it is received: set before the
		// send (a reader that has received it sees it), put back when
		// the send does not happen.
		prev := w.rev.Swap(rev)
		if !deliver(&w.watch, w.out, changes) {
			w.rev.Store(prev)
			return
		}
		var err error
		if rev > 0 {
			changes, rev, err = sw.NextRevision(w.ctx)
		} else {
			changes, err = sw.Next(w.ctx)
		}
		if err != nil {
			w.fail(err)
			return
		}
	}
}

// deliver sends v on out unless the watch is stopped or its connection
// ends first (the watch then fails with the connection's error), so the
// goroutine never outlives Stop nor waits on a reader after the
// connection is gone.
func deliver[T any](w *watch, out chan<- T, v T) bool {
	select {
	case out <- v:
		return true
	case <-w.stop:
	case <-w.c.Done():
		w.fail(w.c.Err())
	}
	return false
}

// fail records why the watch ended, unless Stop ended it.
func (w *watch) fail(err error) {
	select {
	case <-w.stop:
		return
	default:
	}
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
}

// ID returns the server's watcher id.
func (w *watch) ID() string { return w.id }

// Err returns why the watch ended by itself (the watcher was stopped on
// the server, the connection ended: an error wrapping ErrConnClosed), or
// nil while it runs and after Stop.
func (w *watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop ends the watch: it stops the goroutine (a Next it is waiting on is
// abandoned), stops the watcher on the server (bounded by 10 s) and waits
// for the goroutine to return; Changes is closed when it returns. It is
// idempotent and returns the server's error for its Stop call, except
// those that mean the watcher is already gone (the connection ended, an
// unknown watcher id).
func (w *watch) Stop() error {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		err := w.c.Call(ctx, w.facade, 1, w.id, "Stop", nil, nil)
		cancel()
		<-w.done
		if err != nil && !errors.Is(err, ErrConnClosed) && !errors.Is(err, ErrNotFound) {
			w.stopErr = err
		}
	})
	return w.stopErr
}
