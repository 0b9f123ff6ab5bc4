package etcdstore_test

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
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

// TestOpenWhileEtcdHung: a store opens on an etcd member (a process of
// its own) that is stopped with SIGSTOP as the load of the replica begins
// and resumed 1.5 s later, longer than the store's request timeout: the
// pages etcd did not answer are asked for again, and the replica holds
// every key. (Several daemons of a large controller starting at once
// meet the same: etcd answering each one's load late.)
func TestOpenWhileEtcdHung(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := etcdtest.NewProcesses(t, self, 1)
	ctx := bounded(t, 2*time.Minute)
	cfg := config(c, "/hung-open/", store.Feed{})
	w := open(t, cfg)
	const keys = 2500 // three pages of the load
	for i := 0; i < keys; i += 100 {
		if _, err := w.Update(ctx, func(tx store.Txn) error {
			for k := i; k < i+100; k++ {
				if err := tx.Put(fmt.Sprintf("machine/%05d", k), []byte("m")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	cfg.RequestTimeout = time.Second
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan error, 1)
	hung := time.AfterFunc(1500*time.Millisecond, func() { resumed <- c.Resume(0) })
	defer hung.Stop()
	start := time.Now()
	s, err := etcdstore.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open while etcd hung for 1.5 s (request timeout %s): %v", cfg.RequestTimeout, err)
	}
	defer s.Close()
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	t.Logf("opened in %s", time.Since(start).Round(time.Millisecond))
	if n := countKeys(t, ctx, s, "machine/"); n != keys {
		t.Errorf("the replica holds %d keys; want %d", n, keys)
	}
}
