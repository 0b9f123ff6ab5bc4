// Package watchertest holds assertions for tests of the watchers in package
// watcher and of anything built on them (facades, state watches).
//
// # Waits
//
// An assertion that expects a change waits at most ChangeTimeout (10 s). That
// is long enough never to flake on a loaded machine under -race, and it only
// costs time when the test is failing anyway.
//
// An assertion that expects no change waits NoChangeWindow (50 ms). This is
// the one accepted use of a short fixed wait in the project's tests (style
// §6.10): the absence of an event cannot be waited for, only sampled. A slow
// machine can make the check pass when a late change would have arrived, but
// it can never make it fail wrongly, so it weakens rather than flakes. Never
// use time.Sleep to "let things settle"; use these assertions.
//
// # Use
//
// The assertions call Next, so they consume the event they observe, and they
// report with t.Fatalf, so call them from the goroutine running the test.
// Waits also end when t.Context() is cancelled.
//
// This package imports only package watcher and the standard library.
package watchertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/watcher"
)

const (
	// ChangeTimeout bounds how long an assertion waits for an expected change.
	ChangeTimeout = 10 * time.Second
	// NoChangeWindow is how long an assertion watches for an unexpected
	// change. See the package documentation.
	NoChangeWindow = 50 * time.Millisecond
)

// NotifyAssertChange asserts that w has, or gets within ChangeTimeout, a
// pending event, and consumes it.
func NotifyAssertChange(t testing.TB, w *watcher.Notify) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ChangeTimeout)
	defer cancel()
	if err := w.Next(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("notify watcher: no change within %v", ChangeTimeout)
		}
		t.Fatalf("notify watcher: want a change, Next returned %v", err)
	}
}

// NotifyAssertNoChange asserts that w gets no event within NoChangeWindow.
// A stopped watcher fails the assertion: check that with AssertStopped.
func NotifyAssertNoChange(t testing.TB, w *watcher.Notify) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), NoChangeWindow)
	defer cancel()
	err := w.Next(ctx)
	switch {
	case err == nil:
		t.Fatalf("notify watcher: unexpected change")
	case errors.Is(err, context.DeadlineExceeded):
		// Nothing happened within the window: the assertion holds.
	default:
		t.Fatalf("notify watcher: want no change, Next returned %v", err)
	}
}

// StringsAssertChange asserts that w reports exactly the ids in want (in any
// order) within ChangeTimeout, and consumes them. Coalescing makes it a matter
// of timing whether ids added by concurrent changes arrive in one event or in
// several, so the ids may be spread over several events (an id may repeat, as
// the watch contract allows); their union must equal want, and any id not in
// want fails at once. A test that needs one event calls Next itself.
func StringsAssertChange(t testing.TB, w *watcher.Strings, want ...string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("StringsAssertChange: no ids wanted; use StringsAssertNoChange")
	}
	wantSet := make(map[string]bool, len(want))
	for _, id := range want {
		if wantSet[id] {
			t.Fatalf("StringsAssertChange: id %q wanted twice", id)
		}
		wantSet[id] = true
	}
	want = slices.Sorted(slices.Values(want))

	ctx, cancel := context.WithTimeout(t.Context(), ChangeTimeout)
	defer cancel()
	got := make(map[string]bool, len(want))
	var events [][]string
	for len(got) < len(wantSet) {
		ids, err := w.Next(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("strings watcher: want ids %q within %v, got events %q", want, ChangeTimeout, events)
			}
			t.Fatalf("strings watcher: want ids %q, got events %q, then Next returned %v", want, events, err)
		}
		events = append(events, ids)
		for _, id := range ids {
			if !wantSet[id] {
				t.Fatalf("strings watcher: unexpected id %q: want ids %q, got events %q", id, want, events)
			}
			got[id] = true
		}
	}
}

// StringsAssertNoChange asserts that w reports no ids within NoChangeWindow.
// A stopped watcher fails the assertion: check that with AssertStopped.
func StringsAssertNoChange(t testing.TB, w *watcher.Strings) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), NoChangeWindow)
	defer cancel()
	ids, err := w.Next(ctx)
	switch {
	case err == nil:
		t.Fatalf("strings watcher: unexpected change %q", ids)
	case errors.Is(err, context.DeadlineExceeded):
		// Nothing happened within the window: the assertion holds.
	default:
		t.Fatalf("strings watcher: want no change, Next returned %v", err)
	}
}

// AssertStopped asserts that err, typically from Next, says the watcher was
// stopped (errors.Is watcher.ErrStopped).
func AssertStopped(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, watcher.ErrStopped) {
		t.Fatalf("got error %v, want %v", err, watcher.ErrStopped)
	}
}

// FakeClock is a watcher.Clock that only moves when Advance is called.
// It is safe for concurrent use.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	added  chan struct{} // signalled on every AfterFunc
}

type fakeTimer struct {
	c    *FakeClock
	at   time.Time
	f    func()
	done bool
}

// NewFakeClock returns a fake clock at now.
func NewFakeClock(now time.Time) *FakeClock {
	return &FakeClock{now: now, added: make(chan struct{}, 1)}
}

// Now implements watcher.Clock.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements watcher.Clock.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) watcher.Timer {
	c.mu.Lock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	select {
	case c.added <- struct{}{}:
	default:
	}
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.done {
		return false
	}
	t.done = true
	t.c.timers = slices.DeleteFunc(t.c.timers, func(x *fakeTimer) bool { return x == t })
	return true
}

// Pending returns the number of timers not yet fired or stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitTimers waits up to ChangeTimeout until at least n timers are pending.
func (c *FakeClock) WaitTimers(t testing.TB, n int) {
	t.Helper()
	deadline := time.NewTimer(ChangeTimeout)
	defer deadline.Stop()
	for c.Pending() < n {
		select {
		case <-c.added:
		case <-deadline.C:
			t.Fatalf("fake clock: %d timers pending after %v; want %d", c.Pending(), ChangeTimeout, n)
		}
	}
}

// Advance moves the clock by d and runs (synchronously, in order) the
// timers that are then due.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.done = true
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *fakeTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}
