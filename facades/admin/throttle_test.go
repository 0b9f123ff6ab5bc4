package admin

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// testThrottle is a throttle on a fake clock: 3 free failures per pair,
// waits of 1 s doubling to 8 s, 12 free across identities or clients.
func testThrottle(t *testing.T, cfg ThrottleConfig) (*Throttle, func(time.Duration)) {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	if cfg.Free == 0 {
		cfg.Free, cfg.Base, cfg.Max, cfg.Forget = 3, time.Second, 8*time.Second, time.Minute
	}
	return NewThrottle(cfg), func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}

// try begins a login with k and reports it failed (ok false) or
// succeeded; it returns the wait if it was refused.
func try(th *Throttle, k LoginKeys, ok bool) time.Duration {
	a, wait := th.Begin(k)
	if wait > 0 {
		return wait
	}
	if ok {
		a.Succeeded()
	} else {
		a.Failed()
	}
	return 0
}

// The pair's policy: Free failures, then waits doubling from Base up to
// Max, one attempt at a time; never for good; a success forgets the pair;
// quiet keys are forgotten; the table is bounded.
func TestThrottle(t *testing.T) {
	th, advance := testThrottle(t, ThrottleConfig{MaxKeys: 20})
	bob := th.UserKeys("api", "bob", "192.0.2.1:1000")
	for i := range 3 {
		if w := try(th, bob, false); w != 0 {
			t.Fatalf("failure %d: wait %v", i, w)
		}
	}
	if w := try(th, bob, false); w != 0 {
		t.Fatalf("after the free failures: wait %v", w)
	}
	// Each further failure doubles the wait, up to Max.
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		_, w := th.Begin(bob)
		if w != want*time.Second {
			t.Fatalf("failure %d over: wait %v; want %v", i+1, w, want*time.Second)
		}
		advance(w)
		if w := try(th, bob, false); w != 0 {
			t.Fatalf("after the wait: %v", w)
		}
	}
	// The same user from another port of the address, or another name
	// for it, is the same pair.
	for _, k := range []LoginKeys{th.UserKeys("api", "bob", "192.0.2.1:2000"), th.UserKeys("backup", "user-bob", "192.0.2.1:1"),
		th.UserKeys("dashboard", "bob@local", "192.0.2.1:1")} {
		if _, w := th.Begin(k); w == 0 {
			t.Fatalf("%+v: not throttled with its pair", k)
		}
	}
	// Never for good: after Max the login goes ahead, and a success
	// forgets the pair.
	advance(8 * time.Second)
	if w := try(th, bob, true); w != 0 {
		t.Fatalf("after the longest wait: %v", w)
	}
	for range 4 {
		if w := try(th, bob, false); w != 0 {
			t.Fatalf("bob still backs off after logging in: %v", w)
		}
	}
	// Quiet for Forget: forgotten.
	advance(2 * time.Minute)
	if w := try(th, bob, false); w != 0 {
		t.Fatalf("a failure after a quiet minute: wait %v", w)
	}
	// Agents: by pair.
	a := th.AgentKeys("m", "machine-1", "192.0.2.9:1")
	for range 5 {
		try(th, a, false)
	}
	if _, w := th.Begin(a); w == 0 {
		t.Fatal("an agent's guesses are not throttled")
	}
	for _, k := range []LoginKeys{th.AgentKeys("m", "machine-2", "192.0.2.9:1"), th.AgentKeys("m", "machine-1", "192.0.2.10:1"),
		th.AgentKeys("other", "machine-1", "192.0.2.9:1")} {
		if _, w := th.Begin(k); w != 0 {
			t.Fatalf("%+v throttled by machine-1's failures from 192.0.2.9", k)
		}
	}
	// Bounded: at most MaxKeys keys, however many names and clients are
	// tried.
	for i := range 100 {
		try(th, th.UserKeys("api", fmt.Sprintf("u%d", i), fmt.Sprintf("192.0.2.%d:1", i)), false)
	}
	if n := th.Keys(); n > 20 {
		t.Fatalf("%d keys tracked; the limit is 20", n)
	}
	var nilThrottle *Throttle
	na, w := nilThrottle.Begin(nilThrottle.UserKeys("api", "bob", "192.0.2.1:1"))
	na.Failed()
	na.Succeeded()
	na.Abandon()
	if w != 0 {
		t.Fatal("a nil throttle throttles")
	}
}

// Guesses at one name, or at names that do not exist, never keep a
// different identity with the right credentials out: not from another
// client, not from the guesser's own client (the operator's, or a NAT's).
// In the attack run, unknown-user logins to 127.0.0.1 at 5 a second kept
// the admin out 18 times of 20 over 40 s.
func TestThrottleGuessesKeepNoOneElseOut(t *testing.T) {
	for _, c := range []struct {
		what           string
		guesser, admin string
		operator       bool
		freshNames     bool
	}{
		{what: "one unknown name, same local client", guesser: "127.0.0.1:1", admin: "127.0.0.1:2", operator: true},
		{what: "fresh unknown names, same local client", guesser: "127.0.0.1:1", admin: "127.0.0.1:2", operator: true, freshNames: true},
		{what: "one unknown name, behind the admin's NAT", guesser: "198.51.100.7:1", admin: "198.51.100.7:2"},
		{what: "fresh unknown names, behind the admin's NAT", guesser: "198.51.100.7:1", admin: "198.51.100.7:2", freshNames: true},
		{what: "names rotated across 127.0.0.0/8", guesser: "127.0.0.%d:1", admin: "127.0.0.1:2", freshNames: true},
	} {
		t.Run(c.what, func(t *testing.T) {
			th, advance := testThrottle(t, ThrottleConfig{Client: func(remote string) Client {
				cl := ClientOfRemote(remote)
				cl.Operator = c.operator
				return cl
			}})
			refused, guesses := 0, 0
			for i := range 200 { // 5 a second for 40 s
				name, remote := "nobody", c.guesser
				if c.freshNames {
					name = fmt.Sprintf("nobody%d", i)
				}
				if c.guesser == "127.0.0.%d:1" {
					remote = fmt.Sprintf(c.guesser, i%250+1)
				}
				if try(th, th.UserKeys("api", name, remote), false) == 0 {
					guesses++
				}
				if i%10 == 0 { // the admin, every 2 s
					if w := try(th, th.UserKeys("api", "admin", c.admin), true); w != 0 {
						refused++
					}
				}
				advance(200 * time.Millisecond)
			}
			if refused != 0 {
				t.Errorf("the admin was refused %d times of 20", refused)
			}
			if !c.freshNames && guesses > 3+8 {
				t.Errorf("%d guesses at one name checked in 40 s", guesses)
			}
			t.Logf("%d of 200 guesses checked", guesses)
		})
	}
}

// The pair of one name at one client throttles however the client
// rotates its address within what one host has (in the attack run, 150
// guesses from 150 addresses in 127.0.0.0/8 went unthrottled), and the identity
// throttles across clients from where the user has not logged in; from a
// client where it has, and from the local operator's, the user still gets
// in with the right password.
func TestThrottleAcrossAddresses(t *testing.T) {
	th, _ := testThrottle(t, ThrottleConfig{})
	checked := 0
	for i := range 150 {
		if try(th, th.UserKeys("api", "bob", fmt.Sprintf("127.0.%d.%d:1", i/200, i%200+1)), false) == 0 {
			checked++
		}
	}
	if checked > 3+1 {
		t.Errorf("%d of 150 guesses from 127.0.0.0/8 checked; want at most 4", checked)
	}
	// IPv6: a /64 is one client; another /64 another.
	v6 := func(host string) LoginKeys { return th.UserKeys("api", "carol", "["+host+"]:1") }
	for i := range 10 {
		try(th, v6(fmt.Sprintf("2001:db8:0:1::%x", i+1)), false)
	}
	if _, w := th.Begin(v6("2001:db8:0:1:ffff::1")); w == 0 {
		t.Error("another address of the same /64 is not throttled")
	}
	if _, w := th.Begin(v6("2001:db8:0:2::1")); w != 0 {
		t.Errorf("another /64 throttled: %v", w)
	}

	// dave logs in from 192.0.2.1 (familiar), then 200 clients guess.
	th, advance := testThrottle(t, ThrottleConfig{Client: func(remote string) Client {
		cl := ClientOfRemote(remote)
		cl.Operator = cl.Key == "loopback"
		return cl
	}})
	if w := try(th, th.UserKeys("api", "dave", "192.0.2.1:1"), true); w != 0 {
		t.Fatal(w)
	}
	checked = 0
	for i := range 200 {
		if try(th, th.UserKeys("api", "dave", fmt.Sprintf("203.0.113.%d:1", i+1)), false) == 0 {
			checked++
		}
		advance(100 * time.Millisecond)
	}
	if checked > 13+4 { // 12 free, the 13th, then after 1, 2, 4 and 8 s
		t.Errorf("%d of 200 guesses from 200 clients in 20 s checked; want at most 17", checked)
	}
	for _, remote := range []string{"192.0.2.1:2", "127.0.0.1:2"} {
		if w := try(th, th.UserKeys("api", "dave", remote), true); w != 0 {
			t.Errorf("dave from %s refused: %v", remote, w)
		}
	}
	if _, w := th.Begin(th.UserKeys("api", "dave", "198.51.100.1:1")); w == 0 {
		t.Error("dave from a new client is not throttled while his name is guessed at from many")
	}
	// The wait is never longer than Max.
	advance(8 * time.Second)
	if w := try(th, th.UserKeys("api", "dave", "198.51.100.1:1"), true); w != 0 {
		t.Errorf("dave from a new client after Max: %v", w)
	}
}

// A client that sprays guesses over many names loses its free failures
// for every name: a name that has failed from it waits from its first
// failure (1 s, 2 s, 4 s, ...); a name that has not is checked at once.
func TestThrottleSprayingClient(t *testing.T) {
	th, advance := testThrottle(t, ThrottleConfig{})
	const from = "192.0.2.7:1"
	checked := map[string]int{}
	for range 40 { // a pass over 30 names every 250 ms for 10 s
		for i := range 30 {
			n := fmt.Sprintf("user%d", i)
			if try(th, th.UserKeys("api", n, from), false) == 0 {
				checked[n]++
			}
		}
		advance(250 * time.Millisecond)
	}
	// At 0, 1, 3 and 7 s; a pair alone would let 7 through (3 free, then
	// 1 s, 2 s, 4 s).
	for n, c := range checked {
		if c > 4 {
			t.Errorf("%s guessed %d times in 10 s", n, c)
		}
	}
	if w := try(th, th.UserKeys("api", "erin", from), true); w != 0 {
		t.Errorf("a name that has not failed from the spraying client refused: %v", w)
	}
	if _, w := th.Begin(th.UserKeys("api", "user0", "192.0.2.8:1")); w != 0 {
		t.Errorf("a sprayed name from another client refused: %v", w)
	}
}

// Attempts under way count as failures to come: guesses sent at once
// cannot pass the count before their outcomes are known. At a user from a
// client it has not logged in from, from the first attempt (across
// clients too); at an agent, or a user at a familiar client, once the
// key has failed: until then logins with the right password go in
// parallel.
func TestThrottleConcurrentAttempts(t *testing.T) {
	th, _ := testThrottle(t, ThrottleConfig{})
	burst := func(k LoginKeys, n int) []*Attempt {
		var out []*Attempt
		for range n {
			if a, w := th.Begin(k); w == 0 {
				out = append(out, a)
			}
		}
		return out
	}
	k := th.UserKeys("api", "bob", "192.0.2.1:1")
	attempts := burst(k, 50)
	if len(attempts) != 4 {
		t.Fatalf("%d of 50 attempts at once from a new client let through; want 4 (3 free and one more)", len(attempts))
	}
	for _, a := range attempts {
		a.Failed()
	}
	if _, w := th.Begin(k); w != time.Second {
		t.Fatalf("after 4 failures: wait %v; want 1s", w)
	}
	// Across clients: 13 at once (12 free and one more), whatever the
	// clients.
	n := 0
	for i := range 50 {
		if _, w := th.Begin(th.UserKeys("api", "carol", fmt.Sprintf("198.51.100.%d:1", i+1))); w == 0 {
			n++
		}
	}
	if n != 13 {
		t.Fatalf("%d of 50 attempts at once from 50 clients let through; want 13", n)
	}
	// Familiar, or an agent: all at once until a failure.
	fam := th.UserKeys("api", "dave", "192.0.2.9:1")
	try(th, fam, true)
	for _, k := range []LoginKeys{fam, th.AgentKeys("m", "machine-0", "192.0.2.9:1")} {
		attempts := burst(k, 50)
		if len(attempts) != 50 {
			t.Fatalf("%+v: %d of 50 attempts at once let through before any failure", k, len(attempts))
		}
		for _, a := range attempts[1:] {
			a.Succeeded()
		}
		attempts[0].Failed()
		if got := len(burst(k, 50)); got != 3 {
			t.Fatalf("%+v: %d of 50 let through after a failure; want 3", k, got)
		}
	}
	// An abandoned attempt counts nothing.
	k2 := th.UserKeys("api", "erin", "192.0.2.2:1")
	for range 10 {
		a, w := th.Begin(k2)
		if w != 0 {
			t.Fatal("abandoned attempts counted")
		}
		a.Abandon()
	}
}

// Clients: one IPv4 address, one IPv6 /64, every loopback address one.
func TestClientOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1":            "192.0.2.1",
		"::ffff:192.0.2.1":     "192.0.2.1",
		"127.0.0.1":            "loopback",
		"127.9.8.7":            "loopback",
		"::1":                  "loopback",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"fe80::1%eth0":         "fe80::1",
		"":                     "unknown",
	} {
		ip, _ := netip.ParseAddr(in)
		if got := ClientOf(ip); got != want {
			t.Errorf("ClientOf(%q) = %q; want %q", in, got, want)
		}
	}
	if c := ClientOfRemote("[2001:db8::1]:17070"); c.Key != "2001:db8::/64" || c.Operator {
		t.Errorf("ClientOfRemote = %+v", c)
	}
}

// A full table never drops a key an attempt holds, the one Begin has
// just made included: a failure is counted where the next attempt looks.
func TestThrottleFullTableKeepsHeldKeys(t *testing.T) {
	th, _ := testThrottle(t, ThrottleConfig{MaxKeys: 2})
	// Attempts under way hold more keys than the table's size.
	for i := range 2 {
		if _, w := th.Begin(th.UserKeys("api", fmt.Sprintf("other%d", i), fmt.Sprintf("198.51.100.%d:1", i+1))); w != 0 {
			t.Fatal(w)
		}
	}
	k := th.UserKeys("api", "bob", "192.0.2.1:1")
	for i := range 4 {
		if w := try(th, k, false); w != 0 {
			t.Fatalf("failure %d refused: %v", i, w)
		}
	}
	if _, w := th.Begin(k); w == 0 {
		t.Fatal("4 failures of a pair and not throttled: failures were lost with evicted keys")
	}
}
