package watcher_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// receive returns the value ch delivers within watchertest.ChangeTimeout.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(watchertest.ChangeTimeout):
		t.Fatalf("%s: nothing within %v", what, watchertest.ChangeTimeout)
		panic("unreachable")
	}
}

// assertPending asserts that ch delivers nothing within
// watchertest.NoChangeWindow, the accepted short wait for "no change".
func assertPending[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s: got %v, want still blocked", what, v)
	case <-time.After(watchertest.NoChangeWindow):
	}
}

// testWatcher is what Notify and Strings share, so the lifecycle tests run
// over both.
type testWatcher struct {
	OnStop  func(func())
	Kill    func(error)
	Stop    func() error
	Err     func() error
	Done    func() <-chan struct{}
	Next    func(context.Context) error
	Trigger func() // makes an event pending
}

var watcherKinds = []struct {
	name string
	new  func(t *testing.T) testWatcher
}{{
	name: "Notify",
	new: func(t *testing.T) testWatcher {
		w := watcher.NewNotify()
		t.Cleanup(func() { _ = w.Stop() })
		return testWatcher{w.OnStop, w.Kill, w.Stop, w.Err, w.Done, w.Next, w.Trigger}
	},
}, {
	name: "Strings",
	new: func(t *testing.T) testWatcher {
		w := watcher.NewStrings()
		t.Cleanup(func() { _ = w.Stop() })
		next := func(ctx context.Context) error {
			ids, err := w.Next(ctx)
			if err == nil && len(ids) == 0 {
				return errors.New("Next returned no ids and no error")
			}
			return err
		}
		return testWatcher{w.OnStop, w.Kill, w.Stop, w.Err, w.Done, next, func() { w.Add("x") }}
	},
}}

// startNext calls w.Next on a new goroutine and returns where its result
// will arrive.
func startNext(ctx context.Context, w testWatcher) <-chan error {
	res := make(chan error, 1)
	go func() { res <- w.Next(ctx) }()
	return res
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNotifyTriggerCoalesces(t *testing.T) {
	t.Parallel()
	w := watcher.NewNotify()
	defer w.Stop()
	for range 5 {
		w.Trigger()
	}
	watchertest.NotifyAssertChange(t, w)
	watchertest.NotifyAssertNoChange(t, w)
	// The coalesced event is consumed, not lost for good.
	w.Trigger()
	watchertest.NotifyAssertChange(t, w)
	watchertest.NotifyAssertNoChange(t, w)
}

func TestNextBlocksUntilEvent(t *testing.T) {
	t.Parallel()
	for _, kind := range watcherKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			w := kind.new(t)
			res := startNext(t.Context(), w)
			assertPending(t, res, "Next before any event")
			w.Trigger()
			if err := receive(t, res, "Next after an event"); err != nil {
				t.Fatalf("Next after an event: %v", err)
			}
		})
	}
}

func TestStopEndsNext(t *testing.T) {
	t.Parallel()
	for _, kind := range watcherKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			w := kind.new(t)
			if err := w.Err(); err != nil {
				t.Errorf("running watcher: Err() = %v, want nil", err)
			}
			if isClosed(w.Done()) {
				t.Errorf("running watcher: Done is closed")
			}
			res := startNext(t.Context(), w)
			assertPending(t, res, "Next before Stop")
			if err := w.Stop(); err != nil {
				t.Errorf("Stop() = %v, want nil", err)
			}
			watchertest.AssertStopped(t, receive(t, res, "blocked Next after Stop"))
			if err := w.Stop(); err != nil {
				t.Errorf("second Stop() = %v, want nil", err)
			}
			watchertest.AssertStopped(t, w.Err())
			if !isClosed(w.Done()) {
				t.Errorf("stopped watcher: Done is not closed")
			}
			// A stop wins over a pending event, every time.
			w.Trigger()
			for range 10 {
				watchertest.AssertStopped(t, w.Next(t.Context()))
			}
		})
	}
}

func TestKill(t *testing.T) {
	t.Parallel()
	errFirst := errors.New("first")
	errSecond := errors.New("second")
	tests := []struct {
		name string
		stop func(w testWatcher)
		want error
	}{
		{"Kill(err)", func(w testWatcher) { w.Kill(errFirst) }, errFirst},
		{"Kill(nil) is Stop", func(w testWatcher) { w.Kill(nil) }, watcher.ErrStopped},
		{"first Kill wins", func(w testWatcher) { w.Kill(errFirst); w.Kill(errSecond) }, errFirst},
		{"Kill after Stop", func(w testWatcher) { _ = w.Stop(); w.Kill(errSecond) }, watcher.ErrStopped},
		{"Stop after Kill", func(w testWatcher) { w.Kill(errFirst); _ = w.Stop() }, errFirst},
	}
	for _, kind := range watcherKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				w := kind.new(t)
				res := startNext(t.Context(), w)
				tt.stop(w)
				if err := receive(t, res, "blocked Next"); !errors.Is(err, tt.want) {
					t.Errorf("blocked Next: %v, want %v", err, tt.want)
				}
				w.Trigger()
				if err := w.Next(t.Context()); !errors.Is(err, tt.want) {
					t.Errorf("later Next: %v, want %v", err, tt.want)
				}
				if err := w.Err(); !errors.Is(err, tt.want) {
					t.Errorf("Err() = %v, want %v", err, tt.want)
				}
			})
		}
	}
}

func TestOnStop(t *testing.T) {
	t.Parallel()
	for _, kind := range watcherKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			w := kind.new(t)
			var mu sync.Mutex
			var ran []int
			record := func(i int) func() {
				return func() {
					mu.Lock()
					ran = append(ran, i)
					mu.Unlock()
				}
			}
			ranSoFar := func() []int {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(ran)
			}
			for i := 1; i <= 3; i++ {
				w.OnStop(record(i))
			}
			if got := ranSoFar(); len(got) != 0 {
				t.Fatalf("before stop, OnStop funcs ran: %v", got)
			}

			// Whoever sees Done closed sees every OnStop func finished.
			atDone := make(chan []int, 1)
			go func() {
				<-w.Done()
				atDone <- ranSoFar()
			}()

			var wg sync.WaitGroup
			for i := range 8 {
				if i%2 == 0 {
					wg.Go(func() { _ = w.Stop() })
				} else {
					wg.Go(func() { w.Kill(errors.New("killed")) })
				}
			}
			wg.Wait()
			want := []int{3, 2, 1}
			if got := ranSoFar(); !slices.Equal(got, want) {
				t.Errorf("after concurrent stops, ran %v, want %v (once each, newest first)", got, want)
			}
			if got := receive(t, atDone, "Done"); !slices.Equal(got, want) {
				t.Errorf("when Done closed, ran %v, want %v", got, want)
			}

			// On a stopped watcher, OnStop runs f before it returns.
			w.OnStop(record(4))
			if got, want := ranSoFar(), []int{3, 2, 1, 4}; !slices.Equal(got, want) {
				t.Errorf("OnStop after stop: ran %v, want %v", got, want)
			}
			_ = w.Stop()
			if got, want := ranSoFar(), []int{3, 2, 1, 4}; !slices.Equal(got, want) {
				t.Errorf("after another Stop: ran %v, want %v", got, want)
			}
		})
	}
}

func TestNextContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		next func(t *testing.T, w testWatcher) error
		want error
	}{{
		name: "already cancelled",
		next: func(t *testing.T, w testWatcher) error {
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return w.Next(ctx)
		},
		want: context.Canceled,
	}, {
		name: "cancelled while blocked",
		next: func(t *testing.T, w testWatcher) error {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			res := startNext(ctx, w)
			assertPending(t, res, "Next before cancel")
			cancel()
			return receive(t, res, "Next after cancel")
		},
		want: context.Canceled,
	}, {
		name: "deadline",
		next: func(t *testing.T, w testWatcher) error {
			ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
			defer cancel()
			return w.Next(ctx)
		},
		want: context.DeadlineExceeded,
	}, {
		name: "cause is not returned",
		next: func(t *testing.T, w testWatcher) error {
			ctx, cancel := context.WithCancelCause(t.Context())
			cancel(errors.New("connection closed"))
			return w.Next(ctx)
		},
		want: context.Canceled,
	}}
	for _, kind := range watcherKinds {
		for _, tt := range tests {
			t.Run(kind.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				w := kind.new(t)
				if err := tt.next(t, w); err != tt.want {
					t.Errorf("Next: %v, want exactly %v", err, tt.want)
				}
				// An ended context leaves the watcher running and usable.
				if err := w.Err(); err != nil {
					t.Errorf("Err() = %v, want nil", err)
				}
				w.Trigger()
				if err := w.Next(t.Context()); err != nil {
					t.Errorf("Next after an event: %v", err)
				}
			})
		}
	}
}

func TestStringsAddCoalescesAndDedups(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		adds [][]string
		want []string
	}{
		{"one id", [][]string{{"a"}}, []string{"a"}},
		{"sorted", [][]string{{"c", "a", "b"}}, []string{"a", "b", "c"}},
		{"duplicates in one Add", [][]string{{"a", "b", "a", "a"}}, []string{"a", "b"}},
		{"duplicates across Adds", [][]string{{"b"}, {"a", "b"}, {"b"}, {"c", "a"}}, []string{"a", "b", "c"}},
		{"empty Adds between", [][]string{{}, {"b"}, nil, {"a"}, {}}, []string{"a", "b"}},
		{"string order, not numeric", [][]string{{"9", "10", "2"}}, []string{"10", "2", "9"}},
		{"empty id is an id", [][]string{{""}, {"a"}}, []string{"", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := watcher.NewStrings()
			defer w.Stop()
			for _, ids := range tt.adds {
				w.Add(ids...)
			}
			// Everything was added before Next: one event holds it all.
			got, err := w.Next(t.Context())
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Next = %q, want %q", got, tt.want)
			}
			watchertest.StringsAssertNoChange(t, w)
		})
	}
}

func TestStringsNextClearsPending(t *testing.T) {
	t.Parallel()
	w := watcher.NewStrings()
	defer w.Stop()
	w.Add("a", "b")
	watchertest.StringsAssertChange(t, w, "a", "b")
	w.Add("b", "c")
	got, err := w.Next(t.Context())
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if want := []string{"b", "c"}; !slices.Equal(got, want) {
		t.Errorf("second Next = %q, want %q", got, want)
	}
	// The returned slice is the caller's.
	got[0] = "changed"
	w.Add("d")
	watchertest.StringsAssertChange(t, w, "d")
}

func TestStringsAddNoIDsDoesNotWake(t *testing.T) {
	t.Parallel()
	w := watcher.NewStrings()
	defer w.Stop()
	w.Add()
	w.Add([]string{}...)
	watchertest.StringsAssertNoChange(t, w)

	type result struct {
		ids []string
		err error
	}
	res := make(chan result, 1)
	go func() {
		ids, err := w.Next(t.Context())
		res <- result{ids, err}
	}()
	w.Add()
	assertPending(t, res, "blocked Next after Add()")
	w.Add("a")
	got := receive(t, res, "blocked Next after Add(a)")
	if got.err != nil || !slices.Equal(got.ids, []string{"a"}) {
		t.Errorf("blocked Next = %q, %v; want [a], nil", got.ids, got.err)
	}
}

// TestStringsConcurrentAdd checks that no id is lost when Add races with
// Next: every id added is reported by some Next.
func TestStringsConcurrentAdd(t *testing.T) {
	t.Parallel()
	const adders, perAdder = 8, 200
	w := watcher.NewStrings()
	defer w.Stop()
	var wg sync.WaitGroup
	var want []string
	for a := range adders {
		for i := range perAdder {
			want = append(want, fmt.Sprintf("%d-%d", a, i))
		}
		wg.Go(func() {
			for i := range perAdder {
				w.Add(fmt.Sprintf("%d-%d", a, i))
			}
		})
	}
	watchertest.StringsAssertChange(t, w, want...)
	wg.Wait()
	watchertest.StringsAssertNoChange(t, w)
}
