package daemon_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"provisiond/internal/echo"
	"provisiond/rpc/client"
	"provisiond/rpc/params"
	"provisiond/state"
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

// BenchmarkAddMachinesWatched is the write of provisionbench's watch
// workload through the wire: ModelAdmin.AddMachines with placement lxd:N,
// round robin over the model's machines, each machine watched by 10
// WatchContainers watchers (made through state on the daemon's hub, so
// no agent connection is needed). Its cost must not grow with the model:
// compare machines=10 (100 watchers) with machines=1000 (10,000).
func BenchmarkAddMachinesWatched(b *testing.B) {
	for _, machines := range []int{10, 1000} {
		b.Run(fmt.Sprintf("machines=%d", machines), func(b *testing.B) {
			d := start(b, nil)
			model := d.Credentials().DefaultModelUUID
			st := d.State()
			ids := make([]string, machines)
			for i := range ids {
				m, err := st.AddMachine(model, state.MachineParams{})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = m.ID
				for range 10 {
					w, _, err := st.WatchContainers(model, m.ID, "")
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = w.Stop() })
				}
			}
			c := loginAdmin(b, d, model)
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				var res params.AddMachinesResult
				if err := c.Call(ctx, "ModelAdmin", 1, "", "AddMachines",
					params.AddMachinesArgs{Placement: "lxd:" + ids[n%machines]}, &res); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.StopTimer()
			cs, err := st.Containers(model, ids[0])
			if err != nil || len(cs) != (n+machines-1)/machines {
				b.Fatalf("machine %s has %d containers (%v), want %d", ids[0], len(cs), err, (n+machines-1)/machines)
			}
		})
	}
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
