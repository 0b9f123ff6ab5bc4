package daemon_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"provisiond/internal/echo"
	"provisiond/rpc/client"
)

// BenchmarkPing is one Pinger.Ping round trip over the TLS websocket,
// through the whole server: codec, session, registry, facade, writer.
func BenchmarkPing(b *testing.B) {
	d := start(b, nil)
	c := loginAdmin(b, d, d.Credentials().DefaultModelUUID)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEchoBaseline is the same client call against a plain JSON echo
// server on the same transport (TLS 1.3, gorilla websocket, loopback): the
// floor BenchmarkPing is measured against.
func BenchmarkEchoBaseline(b *testing.B) {
	addr, ca := startEcho(b)
	c, err := client.Dial(context.Background(), client.Config{Addr: addr, CACert: ca})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Call(ctx, "Pinger", 1, "", "Ping", nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPingParallel runs Ping from 64 goroutines sharing 8 connections.
func BenchmarkPingParallel(b *testing.B) {
	d := start(b, nil)
	conns := make([]*client.Conn, 8)
	for i := range conns {
		conns[i] = loginAdmin(b, d, d.Credentials().DefaultModelUUID)
	}
	b.SetParallelism(32) // 32 x GOMAXPROCS(2) = 64 goroutines
	b.ReportAllocs()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		c := conns[n.Add(1)%int64(len(conns))]
		for pb.Next() {
			if err := c.Ping(context.Background()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// startEcho serves the echo baseline (package echo) for the benchmark.
func startEcho(b *testing.B) (addr string, ca []byte) {
	hs, ln, ca, err := echo.Serve(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
		hs.Close()
	})
	return ln.Addr().String(), ca
}
