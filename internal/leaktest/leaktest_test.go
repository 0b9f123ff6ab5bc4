package leaktest

import (
	"strings"
	"testing"
	"time"
)

//go:noinline
func parkedForLeaktest(stop <-chan struct{}) { <-stop }

// Stacks finds a goroutine of this module by function name, WaitAtMost
// waits for it to exit, and Check reports it while it runs.
func TestStacksAndCheck(t *testing.T) {
	stop := make(chan struct{})
	exited := make(chan struct{})
	go func() { defer close(exited); parkedForLeaktest(stop) }()
	WaitAtMost(t, 1, "leaktest.parkedForLeaktest")
	for deadline := time.Now().Add(Grace); len(Stacks("leaktest.parkedForLeaktest")) != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the parked goroutine is not listed")
		}
		time.Sleep(time.Millisecond)
	}
	if got := Stacks("leaktest.parkedForLeaktest", "no such function"); len(got) != 0 {
		t.Fatalf("Stacks with a substring no stack has = %d stacks", len(got))
	}
	if got := Stacks("leaktest.TestStacksAndCheck("); len(got) != 0 {
		t.Fatalf("Stacks lists the caller's own goroutine: %q", got)
	}
	err := Check(10 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "parkedForLeaktest") {
		t.Fatalf("Check = %v; want the parked goroutine reported", err)
	}
	close(stop)
	<-exited
	WaitAtMost(t, 0, "leaktest.parkedForLeaktest")
	if err := Check(Grace); err != nil {
		t.Fatal(err)
	}
}
