package watchertest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// fakeTB records failures instead of failing the real test. Fatal and
// Fatalf end the calling goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	ctx    context.Context // if not nil, returned by Context
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Context() context.Context {
	if f.ctx != nil {
		return f.ctx
	}
	return f.TB.Context()
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}

func (f *fakeTB) Error(args ...any) {
	f.failed = true
	f.msg = fmt.Sprint(args...)
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatal(args ...any) {
	f.Error(args...)
	runtime.Goexit()
}

func (f *fakeTB) FailNow() {
	f.failed = true
	runtime.Goexit()
}

func (f *fakeTB) Fail() { f.failed = true }

// run calls assert with a fake TB on its own goroutine, so that a Fatal in
// it ends only that goroutine, and reports how it went.
func run(t *testing.T, ctx context.Context, assert func(testing.TB)) (failed bool, msg string) {
	t.Helper()
	fake := &fakeTB{TB: t, ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		assert(fake)
	}()
	select {
	case <-done:
	case <-time.After(2 * watchertest.ChangeTimeout):
		t.Fatal("assertion did not return")
	}
	return fake.failed, fake.msg
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func shortDeadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

func newNotify(t *testing.T) *watcher.Notify {
	w := watcher.NewNotify()
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

func newStrings(t *testing.T) *watcher.Strings {
	w := watcher.NewStrings()
	t.Cleanup(func() { _ = w.Stop() })
	return w
}

func TestAssertions(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	tests := []struct {
		name string
		// ctx, when it returns non-nil, is the fake's Context.
		ctx      func(t *testing.T) context.Context
		assert   func(t *testing.T) func(testing.TB)
		wantFail string // "" to pass, else a substring of the failure
	}{{
		name: "NotifyAssertChange/pending",
		assert: func(t *testing.T) func(testing.TB) {
			w := newNotify(t)
			w.Trigger()
			return func(tb testing.TB) { watchertest.NotifyAssertChange(tb, w) }
		},
	}, {
		name: "NotifyAssertChange/stopped",
		assert: func(t *testing.T) func(testing.TB) {
			w := newNotify(t)
			w.Trigger()
			_ = w.Stop()
			return func(tb testing.TB) { watchertest.NotifyAssertChange(tb, w) }
		},
		wantFail: "Next returned watcher has been stopped",
	}, {
		name: "NotifyAssertChange/context ends",
		ctx:  func(*testing.T) context.Context { return cancelled() },
		assert: func(t *testing.T) func(testing.TB) {
			w := newNotify(t)
			return func(tb testing.TB) { watchertest.NotifyAssertChange(tb, w) }
		},
		wantFail: "context canceled",
	}, {
		name: "NotifyAssertChange/times out",
		ctx:  shortDeadline,
		assert: func(t *testing.T) func(testing.TB) {
			w := newNotify(t)
			return func(tb testing.TB) { watchertest.NotifyAssertChange(tb, w) }
		},
		wantFail: "no change within",
	}, {
		name: "NotifyAssertNoChange/idle",
		assert: func(t *testing.T) func(testing.TB) {
			w := newNotify(t)
			return func(tb testing.TB) { watchertest.NotifyAssertNoChange(tb, w) }
		},
	}, {
		name: "NotifyAssertNoChange/pending",
		assert: func(t *testing.T) func(testing.TB) {
			w := newNotify(t)
			w.Trigger()
			return func(tb testing.TB) { watchertest.NotifyAssertNoChange(tb, w) }
		},
		wantFail: "unexpected change",
	}, {
		name: "NotifyAssertNoChange/stopped",
		assert: func(t *testing.T) func(testing.TB) {
			w := newNotify(t)
			_ = w.Stop()
			return func(tb testing.TB) { watchertest.NotifyAssertNoChange(tb, w) }
		},
		wantFail: "Next returned watcher has been stopped",
	}, {
		name: "StringsAssertChange/exact, any order",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add("a", "c")
			w.Add("b", "a")
			return func(tb testing.TB) { watchertest.StringsAssertChange(tb, w, "c", "a", "b") }
		},
	}, {
		name: "StringsAssertChange/over several events",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add("a")
			// Whether "b" joins the first event or makes a second one is up
			// to the scheduler; the assertion holds either way.
			go w.Add("b")
			return func(tb testing.TB) { watchertest.StringsAssertChange(tb, w, "a", "b") }
		},
	}, {
		name: "StringsAssertChange/extra id",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add("a", "b", "x")
			return func(tb testing.TB) { watchertest.StringsAssertChange(tb, w, "a", "b") }
		},
		wantFail: `unexpected id "x"`,
	}, {
		name: "StringsAssertChange/missing id",
		ctx:  shortDeadline,
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add("a")
			return func(tb testing.TB) { watchertest.StringsAssertChange(tb, w, "a", "b") }
		},
		wantFail: `want ids ["a" "b"] within 10s, got events [["a"]]`,
	}, {
		name: "StringsAssertChange/stopped",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add("a")
			_ = w.Stop()
			return func(tb testing.TB) { watchertest.StringsAssertChange(tb, w, "a") }
		},
		wantFail: "Next returned watcher has been stopped",
	}, {
		name: "StringsAssertChange/no ids wanted",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			return func(tb testing.TB) { watchertest.StringsAssertChange(tb, w) }
		},
		wantFail: "no ids wanted",
	}, {
		name: "StringsAssertChange/id wanted twice",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add("a")
			return func(tb testing.TB) { watchertest.StringsAssertChange(tb, w, "a", "a") }
		},
		wantFail: `id "a" wanted twice`,
	}, {
		name: "StringsAssertNoChange/idle",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add()
			return func(tb testing.TB) { watchertest.StringsAssertNoChange(tb, w) }
		},
	}, {
		name: "StringsAssertNoChange/pending",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Add("b", "a")
			return func(tb testing.TB) { watchertest.StringsAssertNoChange(tb, w) }
		},
		wantFail: `unexpected change ["a" "b"]`,
	}, {
		name: "StringsAssertNoChange/killed",
		assert: func(t *testing.T) func(testing.TB) {
			w := newStrings(t)
			w.Kill(errBoom)
			return func(tb testing.TB) { watchertest.StringsAssertNoChange(tb, w) }
		},
		wantFail: "Next returned boom",
	}, {
		name: "AssertStopped/ErrStopped",
		assert: func(*testing.T) func(testing.TB) {
			return func(tb testing.TB) { watchertest.AssertStopped(tb, watcher.ErrStopped) }
		},
	}, {
		name: "AssertStopped/wrapped",
		assert: func(*testing.T) func(testing.TB) {
			err := fmt.Errorf("watch 3: %w", watcher.ErrStopped)
			return func(tb testing.TB) { watchertest.AssertStopped(tb, err) }
		},
	}, {
		name: "AssertStopped/nil",
		assert: func(*testing.T) func(testing.TB) {
			return func(tb testing.TB) { watchertest.AssertStopped(tb, nil) }
		},
		wantFail: "got error <nil>, want watcher has been stopped",
	}, {
		name: "AssertStopped/other error",
		assert: func(*testing.T) func(testing.TB) {
			return func(tb testing.TB) { watchertest.AssertStopped(tb, errBoom) }
		},
		wantFail: "got error boom",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ctx context.Context
			if tt.ctx != nil {
				ctx = tt.ctx(t)
			}
			failed, msg := run(t, ctx, tt.assert(t))
			switch {
			case tt.wantFail == "" && failed:
				t.Errorf("assertion failed: %s", msg)
			case tt.wantFail != "" && !failed:
				t.Errorf("assertion passed, want failure containing %q", tt.wantFail)
			case tt.wantFail != "" && !strings.Contains(msg, tt.wantFail):
				t.Errorf("failure %q does not contain %q", msg, tt.wantFail)
			}
		})
	}
}

func TestFakeClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := watchertest.NewFakeClock(start)
	var fired []string
	c.AfterFunc(2*time.Second, func() { fired = append(fired, "b") })
	c.AfterFunc(time.Second, func() { fired = append(fired, "a") })
	stopped := c.AfterFunc(time.Second, func() { fired = append(fired, "x") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop should report true once")
	}
	c.WaitTimers(t, 2)
	c.Advance(999 * time.Millisecond)
	if len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	c.Advance(2 * time.Second)
	if len(fired) != 2 || fired[0] != "a" || fired[1] != "b" || c.Pending() != 0 {
		t.Fatalf("fired %v, %d pending", fired, c.Pending())
	}
	if !c.Now().Equal(start.Add(2999 * time.Millisecond)) {
		t.Fatalf("Now = %v", c.Now())
	}
}

func TestNotifyOnDeliver(t *testing.T) {
	w := watcher.NewNotify()
	defer w.Stop()
	n := 0
	w.OnDeliver(func() { n++ })
	w.Trigger()
	watchertest.NotifyAssertChange(t, w)
	if n != 1 {
		t.Fatalf("OnDeliver ran %d times; want 1", n)
	}
}
