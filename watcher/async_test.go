package watcher_test

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provisiond/provisiond/watcher"
)

// A NextAsync with an event pending completes before it returns, on the
// caller's goroutine; one without waits for Trigger, which completes it.
func TestNotifyNextAsync(t *testing.T) {
	w := watcher.NewNotify()
	defer w.Stop()
	w.Trigger()
	var got []error
	w.NextAsync(context.Background(), func(err error) { got = append(got, err) })
	if len(got) != 1 || got[0] != nil {
		t.Fatalf("pending event: got %v, want one nil completion before return", got)
	}
	w.NextAsync(context.Background(), func(err error) { got = append(got, err) })
	if len(got) != 1 {
		t.Fatalf("no event pending, yet completed: %v", got)
	}
	w.Trigger() // completes the waiting call on this goroutine
	if len(got) != 2 || got[1] != nil {
		t.Fatalf("after Trigger: %v", got)
	}
	// The event went to the waiter: nothing is pending now.
	w.NextAsync(context.Background(), func(err error) { got = append(got, err) })
	if len(got) != 2 {
		t.Fatalf("event delivered twice: %v", got)
	}
	w.Stop()
	if len(got) != 3 || !errors.Is(got[2], watcher.ErrStopped) {
		t.Fatalf("after Stop: %v", got)
	}
}

// Waiting calls are served oldest first, one event each.
func TestNotifyNextAsyncFIFO(t *testing.T) {
	w := watcher.NewNotify()
	defer w.Stop()
	var order []int
	for i := 0; i < 3; i++ {
		w.NextAsync(context.Background(), func(error) { order = append(order, i) })
	}
	w.Trigger()
	w.Trigger()
	if !reflect.DeepEqual(order, []int{0, 1}) {
		t.Fatalf("order %v, want [0 1]", order)
	}
}

// A cancelled context completes a waiting call with its error, once, and
// the call no longer takes events.
func TestNextAsyncContext(t *testing.T) {
	w := watcher.NewNotify()
	defer w.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	w.NextAsync(ctx, func(err error) { done <- err })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	w.Trigger()
	if err := w.Next(context.Background()); err != nil {
		t.Fatalf("the event was taken by the cancelled call: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("completed twice: %v", err)
	default:
	}

	s := watcher.NewStrings()
	defer s.Stop()
	sdone := make(chan error, 2)
	s.NextAsync(ctx, func(_ []string, err error) { sdone <- err }) // ctx already done
	if err := <-sdone; !errors.Is(err, context.Canceled) {
		t.Fatalf("strings: err %v, want context.Canceled", err)
	}
}

func TestStringsNextAsync(t *testing.T) {
	w := watcher.NewStrings()
	var got [][]string
	var errs []error
	done := func(ids []string, err error) { got = append(got, ids); errs = append(errs, err) }
	w.NextAsync(context.Background(), done)
	w.Add("b", "a", "b")
	if !reflect.DeepEqual(got, [][]string{{"a", "b"}}) || errs[0] != nil {
		t.Fatalf("got %v %v", got, errs)
	}
	w.Add("c")
	w.Replace("d")
	w.NextAsync(context.Background(), done)
	if !reflect.DeepEqual(got[1], []string{"d"}) {
		t.Fatalf("after Replace: %v", got)
	}
	w.NextAsync(context.Background(), done)
	w.Stop()
	if len(errs) != 3 || !errors.Is(errs[2], watcher.ErrStopped) {
		t.Fatalf("after Stop: %v", errs)
	}
	w.Add("e") // after Stop: ignored
	w.NextAsync(context.Background(), done)
	if len(errs) != 4 || !errors.Is(errs[3], watcher.ErrStopped) {
		t.Fatalf("Next after Stop: %v", errs)
	}
}

// Under concurrent Trigger, Stop and cancellation every call completes
// exactly once, and no event is lost: each Trigger either completes the
// oldest waiting call or leaves an event pending. So once the triggers are
// done, some event survives (a call got one, or one is pending), no more
// are delivered than were triggered, and an event is never pending while
// a call still waits (that call would have missed it).
func TestNextAsyncExactlyOnce(t *testing.T) {
	for round := 0; round < 50; round++ {
		w := watcher.NewNotify()
		const calls, triggers = 100, 50
		var completions [calls]atomic.Int32
		var delivered atomic.Int32
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		cancelled := round%2 == 0
		wg.Add(3)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				w.NextAsync(ctx, func(err error) {
					if err == nil {
						delivered.Add(1)
					}
					completions[i].Add(1)
				})
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < triggers; i++ {
				w.Trigger()
			}
		}()
		go func() {
			defer wg.Done()
			if cancelled {
				cancel()
			}
		}()
		wg.Wait()
		if cancelled {
			// Cancelled calls complete from their context's callback, which
			// may still be running: wait for them, so nothing but this
			// goroutine acts on w.
			waitAll(t, completions[:])
		}
		waiting := 0
		for i := range completions {
			if completions[i].Load() == 0 {
				waiting++
			}
		}
		// A call made now completes at once if and only if an event is
		// pending.
		var probe []error
		w.NextAsync(context.Background(), func(err error) { probe = append(probe, err) })
		pending := len(probe) == 1 && probe[0] == nil
		switch d := int(delivered.Load()); {
		case d > triggers:
			t.Fatalf("round %d: %d events delivered for %d triggers", round, d, triggers)
		case d == 0 && !pending:
			t.Fatalf("round %d: %d triggers, yet no call got an event and none is pending: events lost", round, triggers)
		case pending && waiting > 0:
			t.Fatalf("round %d: an event is pending while %d calls still wait: they missed it", round, waiting)
		}
		w.Stop()
		cancel()
		// Every completion happens at the latest in Stop or in the
		// context's callback, which may still be running: wait for the
		// callbacks by a bounded poll.
		waitAll(t, completions[:])
		if len(probe) != 1 {
			t.Fatalf("round %d: the probe completed %d times", round, len(probe))
		}
	}
}

// The same for Strings, exactly: every id added is delivered to exactly one
// call or is still pending at the end, under concurrent adds, calls and
// cancellation.
func TestStringsNextAsyncLosesNothing(t *testing.T) {
	for round := 0; round < 50; round++ {
		w := watcher.NewStrings()
		const calls, adds = 100, 200
		var mu sync.Mutex
		got := map[string]int{}
		var completions [calls]atomic.Int32
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(context.Background())
		wg.Add(3)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				w.NextAsync(ctx, func(ids []string, err error) {
					mu.Lock()
					for _, id := range ids {
						got[id]++
					}
					mu.Unlock()
					completions[i].Add(1)
				})
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < adds; i++ {
				w.Add(strconv.Itoa(i))
			}
		}()
		go func() {
			defer wg.Done()
			if round%2 == 0 {
				cancel()
			}
		}()
		wg.Wait()
		cancel()
		waitAll(t, completions[:]) // all cancelled: each has completed, with ids or from its context
		// What no call got is pending: one call now takes it all.
		w.NextAsync(context.Background(), func(ids []string, err error) {
			mu.Lock()
			for _, id := range ids {
				got[id]++
			}
			mu.Unlock()
		})
		w.Stop()
		waitAll(t, completions[:])
		mu.Lock()
		for i := 0; i < adds; i++ {
			if n := got[strconv.Itoa(i)]; n != 1 {
				t.Fatalf("round %d: id %d delivered %d times; want exactly once", round, i, n)
			}
		}
		mu.Unlock()
	}
}

func waitAll(t *testing.T, cs []atomic.Int32) {
	t.Helper()
	for i := range cs {
		for spins := 0; cs[i].Load() == 0; spins++ {
			if spins > 1e6 {
				t.Fatalf("call %d never completed", i)
			}
			runtime.Gosched()
		}
		if n := cs[i].Load(); n != 1 {
			t.Fatalf("call %d completed %d times", i, n)
		}
	}
}
