package rpc_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// echoArgs is the params of the benchmarks' Echo calls: one entity, as an
// agent's Life or InstanceId call on itself.
type echoArgs struct {
	Entities []params.Entity `json:"entities"`
}

var benchArgs = echoArgs{Entities: []params.Entity{{Tag: "machine-0"}}}

// BenchmarkCall is one call's round trip over the TLS websocket, one call
// at a time: the reader, a handler on the pool, the reply's write (the
// rpc workload's one agent). Its allocations are the server's and our
// client's.
func BenchmarkCall(b *testing.B) {
	ts := startServer(b, nil)
	c := ts.dial(b)
	ctx := context.Background()
	var res echoArgs
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Call(ctx, "T", 1, "", "Echo", benchArgs, &res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCallParallel is BenchmarkCall from 64 clients, each on its own
// connection and one call at a time (the rpc workload's 64 agents).
func BenchmarkCallParallel(b *testing.B) {
	ts := startServer(b, nil)
	conns := make([]*client.Conn, 64)
	for i := range conns {
		conns[i] = ts.dial(b)
	}
	var next atomic.Int64
	ctx := context.Background()
	b.SetParallelism(32) // 32 x GOMAXPROCS(2) = 64 goroutines
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := conns[int(next.Add(1)-1)%len(conns)]
		var res echoArgs
		for pb.Next() {
			if err := c.Call(ctx, "T", 1, "", "Echo", benchArgs, &res); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkLaterReplies is one commit waking ten watchers of one agent:
// ten Later calls of one connection answered one after another from one
// goroutine (as the hub's publisher answers them), the client reading the
// ten replies and sending its ten next calls. An op is the ten replies;
// writes/op and records/op are the server's socket writes and TLS
// records for them.
func BenchmarkLaterReplies(b *testing.B) {
	const k = 10
	tap := newTap()
	ts := startServerOn(b, nil, tap.wrap)
	c := ts.dial(b)
	sc := tap.conn(b)
	done := make(chan error, k)
	next := func() {
		var r params.StringResult
		c.Go("T", 1, "", "Later", nil, &r, func(err error) { done <- err })
	}
	for range k {
		next()
	}
	result := params.StringResult{Result: "0/lxd/1"}
	ts.root.later.waitFor(b, k)
	before, recBefore := sc.counts()
	b.ReportAllocs()
	for b.Loop() {
		for _, reply := range ts.root.later.takeAll(b, k) {
			reply(result, nil)
		}
		for range k {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		for range k {
			next()
		}
	}
	after, recAfter := sc.counts()
	b.ReportMetric(float64(len(after)-len(before))/float64(b.N), "writes/op")
	b.ReportMetric(float64(recAfter-recBefore)/float64(b.N), "records/op")
}
