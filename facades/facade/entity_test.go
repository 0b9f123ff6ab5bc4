package facade

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// One entity's connections are counted across connections up to the limit;
// the one over it is refused with quota-limit-exceeded and counts nothing;
// a connection given back (once, however often its release is called)
// makes room; an entity with no connection left is forgotten.
func TestEntityLimitsCountConnections(t *testing.T) {
	l := NewEntityLimits(2, 0)
	_, r1, err := l.admit("machine:m/0", "machine-0")
	if err != nil {
		t.Fatal(err)
	}
	_, r2, err := l.admit("machine:m/0", "machine-0")
	if err != nil {
		t.Fatal(err)
	}
	// Another entity has its own count.
	_, other, err := l.admit("machine:m/1", "machine-1")
	if err != nil {
		t.Fatal(err)
	}
	_, r3, err := l.admit("machine:m/0", "machine-0")
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Code != params.CodeQuotaLimitExceeded ||
		pe.Message != "too many connections for machine-0 (limit 2)" || r3 != nil {
		t.Fatalf("third connection: %v (release %v); want quota-limit-exceeded", err, r3 != nil)
	}
	if n := l.Conns("machine:m/0"); n != 2 {
		t.Fatalf("after a refusal: %d connections counted, want 2", n)
	}
	r1()
	r1() // a second release gives nothing back
	if n := l.Conns("machine:m/0"); n != 1 {
		t.Fatalf("after one release called twice: %d connections, want 1", n)
	}
	if _, r3, err = l.admit("machine:m/0", "machine-0"); err != nil {
		t.Fatalf("a connection given back makes room: %v", err)
	}
	r2()
	r3()
	other()
	if len(l.m) != 0 {
		t.Errorf("entities without connections are kept: %v", l.m)
	}
}

// Retired limits (a stopping daemon's) count no connection given back.
func TestEntityLimitsRetire(t *testing.T) {
	l := NewEntityLimits(2, 0)
	_, release, err := l.admit("machine:m/0", "machine-0")
	if err != nil {
		t.Fatal(err)
	}
	l.Retire()
	release()
	if n := l.Conns("machine:m/0"); n != 1 {
		t.Fatalf("given back after Retire: %d connections counted, want 1", n)
	}
	var nilLimits *EntityLimits
	nilLimits.Retire()
}

// The watcher quota is one per entity, shared by its connections, and
// starts afresh once the entity has no connection left.
func TestEntityLimitsShareTheWatcherQuota(t *testing.T) {
	l := NewEntityLimits(0, 3)
	q1, r1, err := l.admit("user:bob", "user-bob")
	if err != nil {
		t.Fatal(err)
	}
	q2, r2, err := l.admit("user:bob", "user-bob")
	if err != nil {
		t.Fatal(err)
	}
	if q1 == nil || q1 != q2 {
		t.Fatalf("two connections of one entity have quotas %p and %p, want one", q1, q2)
	}
	q3, r3, err := l.admit("user:alice", "user-alice")
	if err != nil || q3 == q1 {
		t.Fatalf("another entity shares the quota (%v)", err)
	}
	r1()
	r2()
	r3()
	q4, r4, err := l.admit("user:bob", "user-bob")
	if err != nil || q4 == q1 {
		t.Fatalf("a returning entity gets its old quota (%v)", err)
	}
	r4()
	if q, _, err := NewEntityLimits(0, 0).admit("user:bob", "user-bob"); err != nil || q != nil {
		t.Errorf("no watcher limit: quota %v, %v", q, err)
	}
}

// Nil limits admit everything; under concurrent admits and releases the
// count never passes the limit and ends at zero.
func TestEntityLimitsConcurrent(t *testing.T) {
	var none *EntityLimits
	if q, release, err := none.admit("machine:m/0", "machine-0"); err != nil || q != nil {
		t.Fatalf("nil limits: %v, %v", q, err)
	} else {
		release()
	}
	const limit = 4
	l := NewEntityLimits(limit, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	peak := 0
	for range 16 {
		wg.Go(func() {
			for range 50 {
				_, release, err := l.admit("machine:m/0", "machine-0")
				if err != nil {
					continue
				}
				mu.Lock()
				peak = max(peak, l.Conns("machine:m/0"))
				mu.Unlock()
				release()
			}
		})
	}
	wg.Wait()
	if peak > limit || peak < 1 {
		t.Errorf("peak of %d connections for a limit of %d", peak, limit)
	}
	if n := l.Conns("machine:m/0"); n != 0 {
		t.Errorf("%d connections left counted", n)
	}
}

func TestEntityKey(t *testing.T) {
	super := &state.User{Name: "admin", Access: state.AccessSuperuser}
	bob := &state.User{Name: "bob", Access: state.AccessLogin}
	m := &AgentMachine{Model: "uuid", ID: "3"}
	for _, tc := range []struct {
		auth    Auth
		key     string
		counted bool
	}{
		{Auth{Controller: true, Machine: m}, "", false},
		{Auth{User: super}, "", false},
		{Auth{Machine: m}, "machine:uuid/3", true},
		{Auth{User: bob}, "user:bob", true},
		{Auth{}, "", false},
	} {
		if key, counted := EntityKey(tc.auth); key != tc.key || counted != tc.counted {
			t.Errorf("EntityKey(%+v) = %q, %v; want %q, %v", tc.auth, key, counted, tc.key, tc.counted)
		}
	}
}

// Bounded quotes a short string whole and a long one by its first 64 bytes,
// cut at a rune boundary, with its length.
func TestBounded(t *testing.T) {
	if got := Bounded("machine-0"); got != "machine-0" {
		t.Errorf("short: %q", got)
	}
	exact := strings.Repeat("a", 64)
	if got := Bounded(exact); got != exact {
		t.Errorf("64 bytes: %q", got)
	}
	long := strings.Repeat("a", 63) + "é" + strings.Repeat("b", 100) // é straddles byte 64
	got := Bounded(long)
	if want := strings.Repeat("a", 63) + "...(165 bytes)"; got != want {
		t.Errorf("long: %q, want %q", got, want)
	}
	if !utf8.ValidString(got) {
		t.Errorf("cut inside a rune: %q", got)
	}
}
