package watcher_test

import (
	"testing"
	"time"

	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// A batch opens with its first id, collects ids until the quiet period
// has passed, and reaches the watcher as one change; the next id opens
// the next batch. Stopping the watcher stops a pending timer.
func TestBatch(t *testing.T) {
	clock := watchertest.NewFakeClock(time.Unix(0, 0))
	w := watcher.NewStrings()
	b := watcher.NewBatch(w, clock, time.Second)
	b.Add() // nothing: no batch opens
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers after adding nothing", n)
	}
	b.Add("0")
	clock.Advance(900 * time.Millisecond)
	b.Add("1", "0")
	watchertest.StringsAssertNoChange(t, w)
	if n := clock.Pending(); n != 1 {
		t.Fatalf("%d timers for one open batch", n)
	}
	clock.Advance(100 * time.Millisecond) // a second after the first id
	watchertest.StringsAssertChange(t, w, "0", "1")
	b.Add("2")
	clock.Advance(999 * time.Millisecond)
	watchertest.StringsAssertNoChange(t, w)
	clock.Advance(time.Millisecond)
	watchertest.StringsAssertChange(t, w, "2")

	b.Add("3")
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers left after Stop", n)
	}
	b.Add("4") // after Stop: dropped, no timer
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers after an Add on a stopped watcher", n)
	}
}

// A timer notify watcher has an event delay after it is made and delay
// after each event it delivers; undelivered, it does not fire again.
// Stopping it stops its timer.
func TestTimerNotify(t *testing.T) {
	clock := watchertest.NewFakeClock(time.Unix(0, 0))
	w := watcher.NewTimerNotify(clock, time.Minute)
	watchertest.NotifyAssertNoChange(t, w)
	clock.Advance(time.Minute)
	watchertest.NotifyAssertChange(t, w) // delivered: re-armed
	clock.Advance(59 * time.Second)
	watchertest.NotifyAssertNoChange(t, w)
	clock.Advance(time.Second)
	// Not consumed: no timer runs until it is.
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers while an event waits to be delivered", n)
	}
	clock.Advance(time.Hour)
	watchertest.NotifyAssertChange(t, w) // one event, however long it waited
	if n := clock.Pending(); n != 1 {
		t.Fatalf("%d timers after a delivery; want 1", n)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := clock.Pending(); n != 0 {
		t.Fatalf("%d timers left after Stop", n)
	}
}
