package provisiondtest

import (
	"testing"
	"time"

	"github.com/provisiond/provisiond/watcher/watchertest"
)

// Watch is what Next and NoNext read: a *client.NotifyWatch
// (Watch[struct{}]) or a *client.StringsWatch (Watch[[]string]).
type Watch[T any] interface {
	Changes() <-chan T
	Err() error
}

// ChangeTimeout bounds how long Next waits for a change; NoChangeWindow is
// how long NoNext watches for one (an absence can only be sampled). They
// are watchertest's.
const (
	ChangeTimeout  = watchertest.ChangeTimeout
	NoChangeWindow = watchertest.NoChangeWindow
)

// Next waits at most ChangeTimeout for w's next value and returns it. It
// fails t when none comes, or when the watch ends (with its Err).
func Next[T any](t testing.TB, w Watch[T]) T {
	t.Helper()
	timer := time.NewTimer(ChangeTimeout)
	defer timer.Stop()
	select {
	case v, ok := <-w.Changes():
		if !ok {
			t.Fatalf("provisiondtest: the watch ended: %v", w.Err())
		}
		return v
	case <-timer.C:
		t.Fatalf("provisiondtest: no change within %v", ChangeTimeout)
	}
	panic("unreachable")
}

// NoNext fails t when w delivers a value (or ends) within NoChangeWindow.
func NoNext[T any](t testing.TB, w Watch[T]) {
	t.Helper()
	timer := time.NewTimer(NoChangeWindow)
	defer timer.Stop()
	select {
	case v, ok := <-w.Changes():
		if !ok {
			t.Fatalf("provisiondtest: the watch ended: %v", w.Err())
		}
		t.Fatalf("provisiondtest: unexpected change %v", v)
	case <-timer.C:
	}
}
