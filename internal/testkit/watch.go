package testkit

import (
	"slices"
	"testing"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// NextResult is the outcome of a StringsWatcher's Next.
type NextResult struct {
	IDs []string
	Err error
}

// PendingStrings starts w's Next in the background; its result arrives
// on the returned channel.
func PendingStrings(t testing.TB, w *client.StringsWatcher) chan NextResult {
	ch := make(chan NextResult, 1)
	go func() {
		ids, err := w.Next(Ctx(t))
		ch <- NextResult{ids, err}
	}()
	return ch
}

// PendingNotify is PendingStrings for a NotifyWatcher.
func PendingNotify(t testing.TB, w *client.NotifyWatcher) chan error {
	ch := make(chan error, 1)
	go func() { ch <- w.Next(Ctx(t)) }()
	return ch
}

// NotYet asserts that nothing arrives on ch within the no-change window
// (the one accepted fixed wait: an absence can only be sampled).
func NotYet[T any](t testing.TB, ch chan T) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("watcher fired early: %+v", r)
	case <-time.After(watchertest.NoChangeWindow):
	}
}

// WantIDs asserts that a Next pending on ch returns want, in any order.
func WantIDs(t testing.TB, ch chan NextResult, want ...string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatalf("Next: %v", r.Err)
		}
		slices.Sort(r.IDs)
		slices.Sort(want)
		if !slices.Equal(r.IDs, want) {
			t.Fatalf("Next = %v; want %v", r.IDs, want)
		}
	case <-time.After(watchertest.ChangeTimeout):
		t.Fatalf("no event; want %v", want)
	}
}

// WantNotify asserts that a Next pending on ch returns.
func WantNotify(t testing.TB, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
	case <-time.After(watchertest.ChangeTimeout):
		t.Fatal("no event")
	}
}
