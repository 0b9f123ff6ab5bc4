package rpc_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

// startHeldCalls starts n "Later" calls from our client on a server whose
// TCP connections are tapped, waits until every one waits for its reply
// and returns their reply functions in the order the server got them,
// the server's connection and its socket, and the results the client
// gets (by reply order) once the calls end.
func startHeldCalls(t *testing.T, n int) (reps []func(any, error), conn *rpc.Conn, sc *tapConn, got func() []string) {
	t.Helper()
	var server atomic.Pointer[rpc.Conn]
	tap := newTap()
	ts := startServerOn(t, func(c *rpc.Config) {
		newRoot := c.NewRoot
		c.NewRoot = func(info rpc.ConnInfo, cn *rpc.Conn) rpc.Root {
			server.Store(cn)
			return newRoot(info, cn)
		}
	}, tap.wrap)
	c := ts.dial(t)
	sc = tap.conn(t)
	if err := c.Call(ctxT(t), "T", 1, "", "Nothing", nil, nil); err != nil {
		t.Fatal(err) // answered: the server's connection is known
	}
	var (
		mu      sync.Mutex
		results []string
		wg      sync.WaitGroup
	)
	for range n {
		wg.Add(1)
		var r params.StringResult
		c.Go("T", 1, "", "Later", nil, &r, func(err error) {
			defer wg.Done()
			if err != nil {
				t.Errorf("Later: %v", err)
				return
			}
			mu.Lock()
			results = append(results, r.Result)
			mu.Unlock()
		})
	}
	reps = ts.root.later.takeAll(t, n)
	waitConnGoroutines(t, 1) // every call has started
	got = func() []string {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return results
	}
	return reps, server.Load(), sc, got
}

// Replies given while their connection is held leave together when it is
// released: one socket write, one TLS record, in the order given, however
// the connection's worker is scheduled meanwhile (the hub's publisher
// waking a connection's ten watchers holds it until the commit's last
// sink has run; without the hold the first reply's worker could write it
// before the publisher gave the other nine).
func TestHeldRepliesAreWrittenTogether(t *testing.T) {
	const n = 10
	reps, conn, sc, got := startHeldCalls(t, n)
	if conn == nil {
		t.Fatal("no server connection")
	}
	before, recBefore := sc.counts()
	for i, reply := range reps {
		conn.HoldReplies() // as the facade does for each reply it gives
		reply(params.StringResult{Result: smallResult(i + 1)}, nil)
	}
	for range reps {
		conn.ReleaseReplies() // as the hub's end of publish does
	}
	results := got()
	for i, r := range results {
		if want := smallResult(i + 1); r != want {
			t.Fatalf("reply %d carries %q, want %q (replies in the order given)", i+1, r, want)
		}
	}
	after, recAfter := sc.counts()
	if writes, records := len(after)-len(before), recAfter-recBefore; writes != 1 || records != 1 {
		t.Fatalf("%d replies given while held went out in %d socket writes (%v) and %d TLS records; want 1 and 1",
			n, writes, after[len(before):], records)
	}
}

// A hold keeps replies only until its release: a connection held and
// released with no reply in between, and one released before its reply,
// answer as without a hold; a reply given while the connection is held
// twice waits for the second release.
func TestHoldReleaseNesting(t *testing.T) {
	reps, conn, sc, got := startHeldCalls(t, 3)
	conn.HoldReplies()
	conn.ReleaseReplies()
	reps[0](params.StringResult{Result: "r1"}, nil) // not held: written at once

	conn.HoldReplies()
	conn.HoldReplies()
	reps[1](params.StringResult{Result: "r2"}, nil)
	conn.ReleaseReplies()
	// Still held once: r2 waits. r3 is given and the last release lets
	// both go; the client sees all three, in order.
	reps[2](params.StringResult{Result: "r3"}, nil)
	conn.ReleaseReplies()
	if r := got(); fmt.Sprint(r) != "[r1 r2 r3]" {
		t.Fatalf("replies %v, want [r1 r2 r3]", r)
	}
	if sizes, _ := sc.counts(); len(sizes) == 0 {
		t.Fatal("no socket writes")
	}
}

// A release without a hold is a bug of its caller: it panics rather than
// leave the connection's count of holds wrong.
func TestReleaseWithoutHoldPanics(t *testing.T) {
	_, conn, _, _ := startHeldCalls(t, 0)
	defer func() {
		if recover() == nil {
			t.Fatal("ReleaseReplies without HoldReplies did not panic")
		}
	}()
	conn.ReleaseReplies()
}

// ConnOf finds the connection of a call's context only.
func TestConnOfOtherContext(t *testing.T) {
	if c := rpc.ConnOf(context.Background()); c != nil {
		t.Fatalf("ConnOf(Background) = %p, want nil", c)
	}
}
