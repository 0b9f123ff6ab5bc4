package admin

import (
	"fmt"
	"testing"
	"time"
)

// The throttle's policy: Free failures of a key, then waits doubling from
// Base up to Max; the per-user key counts across addresses but is not
// applied on loopback; success forgets the user's failures, not the
// address's; quiet keys are forgotten; the table is bounded.
func TestThrottle(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	th := NewThrottle(ThrottleConfig{Free: 3, Base: time.Second, Max: 8 * time.Second, Forget: time.Minute, MaxKeys: 10,
		Now: func() time.Time { return now }})
	fromA := UserKeys("api", "bob", "192.0.2.1:1000")
	for i := 0; i < 3; i++ {
		if w := th.Wait(fromA); w != 0 {
			t.Fatalf("failure %d: wait %v", i, w)
		}
		th.Failed(fromA)
	}
	if w := th.Wait(fromA); w != 0 {
		t.Fatalf("after the free failures: wait %v", w)
	}
	// Each further failure doubles the wait, up to Max.
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		th.Failed(fromA)
		if w := th.Wait(fromA); w != want*time.Second {
			t.Fatalf("failure %d over: wait %v; want %v", i+1, w, want*time.Second)
		}
	}
	// Another address backs off for bob too (the per-user key)...
	fromB := UserKeys("api", "bob", "192.0.2.2:1000")
	if w := th.Wait(fromB); w != 8*time.Second {
		t.Fatalf("bob from another address: wait %v", w)
	}
	// ... but not on loopback, nor another user from that address.
	if w := th.Wait(UserKeys("api", "bob", "127.0.0.1:1000")); w != 0 {
		t.Fatalf("bob on loopback: wait %v", w)
	}
	if w := th.Wait(UserKeys("api", "carol", "192.0.2.2:1000")); w != 0 {
		t.Fatalf("carol from another address: wait %v", w)
	}
	// Never for good: after Max the login goes ahead; a success forgets
	// bob, not address A.
	now = now.Add(8 * time.Second)
	if w := th.Wait(fromB); w != 0 {
		t.Fatalf("after the longest wait: %v", w)
	}
	th.Succeeded(fromB)
	if w := th.Wait(fromB); w != 0 {
		t.Fatal("bob still backs off after logging in")
	}
	th.Failed(fromA)
	if w := th.Wait(fromA); w != 8*time.Second {
		t.Fatalf("address A forgot its failures on bob's success: wait %v", w)
	}
	// Quiet for Forget: forgotten.
	now = now.Add(2 * time.Minute)
	th.Failed(fromA)
	if w := th.Wait(fromA); w != 0 {
		t.Fatalf("a failure after a quiet minute: wait %v", w)
	}
	// Agents: one key per agent, no address.
	a := AgentKeys("m", "machine-1")
	for i := 0; i < 4; i++ {
		th.Failed(a)
	}
	if th.Wait(a) == 0 || th.Wait(AgentKeys("m", "machine-2")) != 0 {
		t.Fatal("agents are not throttled one by one")
	}
	// Bounded: at most MaxKeys keys, however many names are tried.
	for i := 0; i < 100; i++ {
		th.Failed(UserKeys("api", fmt.Sprintf("u%d", i), "127.0.0.1:1"))
		th.Failed(UserKeys("api", fmt.Sprintf("u%d", i), fmt.Sprintf("192.0.2.%d:1", i)))
	}
	if n := th.Keys(); n > 10 {
		t.Fatalf("%d keys tracked; the limit is 10", n)
	}
	var nilThrottle *Throttle
	nilThrottle.Failed(fromA)
	if nilThrottle.Wait(fromA) != 0 {
		t.Fatal("a nil throttle throttles")
	}
}
