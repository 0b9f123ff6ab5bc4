package etcdstore_test

import (
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
)

// TestMemberHung: a store on three etcd members, each a process of its
// own, writes while the leader is stopped with SIGSTOP (hung: its sockets
// open, nothing answered). The member watch finds it down and moves the
// store's client off it, and writes resume well before gRPC's keepalive
// would have closed its connection (10 s at least); resumed, the member is
// used again. The bound asserted is generous (a loaded box); the pause
// itself is logged.
func TestMemberHung(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.NewProcesses(t, self, 3)
	cfg := config(c, "/hung/", store.Feed{})
	cfg.RequestTimeout = 2 * time.Second
	s := open(t, cfg)
	ctx := bounded(t, 2*time.Minute)

	var mu sync.Mutex
	var acks []time.Time
	acked := func(since time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		i, _ := slices.BinarySearchFunc(acks, since, func(a, b time.Time) int { return a.Compare(b) })
		return len(acks) - i
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.Update(ctx, incr("counter/0", "0")); err == nil {
				mu.Lock()
				acks = append(acks, time.Now())
				mu.Unlock()
			} else if ctx.Err() != nil {
				return
			}
		}
	})
	defer func() { close(done); wg.Wait() }()
	waitFor(t, ctx, "10 writes", func() bool { return acked(time.Time{}) >= 10 })

	lead, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	if err := c.Pause(lead); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the hung member to be excluded", func() bool {
		m := s.Members()[lead]
		return !m.Up && m.Excluded
	})
	excluded := time.Since(paused)
	waitFor(t, ctx, "10 writes after the leader hung", func() bool { return acked(paused) >= 10 })
	mu.Lock()
	i, _ := slices.BinarySearchFunc(acks, paused, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	for k := max(i, 1); k < len(acks); k++ {
		gap = max(gap, acks[k].Sub(acks[k-1]))
	}
	mu.Unlock()
	t.Logf("leader m%d hung: excluded after %s; longest pause between two writes %s (request timeout %s)",
		lead, excluded.Round(time.Millisecond), gap.Round(time.Millisecond), cfg.RequestTimeout)
	if gap > 5*cfg.RequestTimeout {
		t.Errorf("writes paused %s when the leader hung; want at most %s", gap, 5*cfg.RequestTimeout)
	}
	if s.Stats().MemberExclusions == 0 {
		t.Error("Stats.MemberExclusions is 0")
	}
	for i, m := range s.Members() {
		if i != lead && (!m.Up || m.Excluded || m.DBSize <= 0 || m.DBQuota <= 0) {
			t.Errorf("member m%d: %+v; want up, in use, with its database's size and quota", i, m)
		}
	}

	if err := c.Resume(lead); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the resumed member to be used again", func() bool {
		m := s.Members()[lead]
		return m.Up && !m.Excluded
	})
}
