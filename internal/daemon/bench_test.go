package daemon_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/echo"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
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
				m, err := st.AddMachine(b.Context(), model, state.MachineParams{})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = m.ID
				for range 10 {
					w, _, err := st.WatchContainers(b.Context(), model, m.ID, "")
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
			cs, err := st.Containers(b.Context(), model, ids[0])
			if err != nil || len(cs) != (n+machines-1)/machines {
				b.Fatalf("machine %s has %d containers (%v), want %d", ids[0], len(cs), err, (n+machines-1)/machines)
			}
		})
	}
}

// BenchmarkAgentLifeInstanceId is provisionbench's rpc workload with one
// agent: a logged-in machine agent calls Provisioner.Life and
// Provisioner.InstanceId (v11) on itself, alternately; one op is one call.
// Compare with BenchmarkEchoBaseline.
func BenchmarkAgentLifeInstanceId(b *testing.B) {
	d := start(b, nil)
	c := benchAgents(b, d, 1)[0]
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := agentCall(ctx, c, i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkAgentLifeInstanceIdParallel is the same from 64 goroutines,
// each the agent of its own machine on its own connection (provisionbench
// rpc -n 64). Compare with BenchmarkEchoParallel: with the cores saturated
// the calls/s ratio follows the ratio of their cpu-ns/op (the process's CPU
// time per call, client side included), which a busy machine disturbs less
// than ns/op.
func BenchmarkAgentLifeInstanceIdParallel(b *testing.B) {
	d := start(b, nil)
	conns := benchAgents(b, d, 64)
	b.SetParallelism(32) // 32 x GOMAXPROCS(2) = 64 goroutines
	b.ReportAllocs()
	b.ResetTimer() // not the set-up
	defer reportCPU(b)()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		c := conns[(n.Add(1)-1)%int64(len(conns))]
		i := 0
		for pb.Next() {
			if err := agentCall(context.Background(), c, i); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkEchoParallel is BenchmarkAgentLifeInstanceIdParallel's calls
// (64 goroutines, a connection each, the same params) against the echo
// baseline server, which answers with the params.
func BenchmarkEchoParallel(b *testing.B) {
	addr, ca := startEcho(b)
	conns := make([]*client.Conn, 64)
	for i := range conns {
		c, err := client.Dial(context.Background(), client.Config{Addr: addr, CACert: ca})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer() // not the set-up
	defer reportCPU(b)()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := n.Add(1) - 1
		c := conns[i%int64(len(conns))]
		args := params.Entities{Entities: []params.Entity{{Tag: fmt.Sprintf("machine-%d", i)}}}
		for pb.Next() {
			var res params.Entities
			if err := c.Call(context.Background(), "Provisioner", 11, "", "Life", args, &res); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// reportCPU starts measuring the process's CPU time (user and system); the
// function it returns reports it per op as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// agentCall makes call i of an agent's loop: Life on even i, InstanceId on
// odd i, each on the agent's own machine.
func agentCall(ctx context.Context, c *benchAgent, i int) error {
	args := params.Entities{Entities: []params.Entity{{Tag: c.tag}}}
	if i%2 == 0 {
		var res params.LifeResults
		if err := c.conn.Call(ctx, "Provisioner", 11, "", "Life", args, &res); err != nil {
			return err
		}
		if len(res.Results) != 1 || res.Results[0].Error != nil || res.Results[0].Life != "alive" {
			return fmt.Errorf("Life: %+v", res)
		}
		return nil
	}
	var res params.StringResults
	if err := c.conn.Call(ctx, "Provisioner", 11, "", "InstanceId", args, &res); err != nil {
		return err
	}
	if len(res.Results) != 1 || res.Results[0].Error != nil || res.Results[0].Result == "" {
		return fmt.Errorf("InstanceId: %+v", res)
	}
	return nil
}

type benchAgent struct {
	tag  string
	conn *client.Conn
}

// benchAgents makes n provisioned machines in the default model, as
// provisionbench's fixture does (password, instance id, nonce), and logs
// in as each one's agent.
func benchAgents(b *testing.B, d *daemon.Daemon, n int) []*benchAgent {
	b.Helper()
	st, model := d.State(), d.Credentials().DefaultModelUUID
	out := make([]*benchAgent, n)
	for i := range out {
		pw := fmt.Sprintf("bench-agent-password-%d", i)
		m, err := st.AddMachine(b.Context(), model, state.MachineParams{Jobs: []string{state.JobHostUnits}, Password: pw})
		if err != nil {
			b.Fatal(err)
		}
		nonce := "bench:" + m.ID
		if err := st.SetInstanceInfo(b.Context(), model, m.ID, state.InstanceInfo{InstanceID: "bench-i-" + m.ID, Nonce: nonce}); err != nil {
			b.Fatal(err)
		}
		c := dial(b, d, model)
		if _, err := c.LoginAgent(ctxT(b), m.Tag().String(), pw, nonce); err != nil {
			b.Fatal(err)
		}
		out[i] = &benchAgent{tag: m.Tag().String(), conn: c}
	}
	return out
}

// startEcho serves the echo baseline (package echo) for the benchmark.
func startEcho(b *testing.B) (addr string, ca []byte) {
	srv, err := echo.Serve(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	return srv.Addr, srv.CACert
}

// BenchmarkChangeDelivered is one change of provisionbench's watch
// workload with its agent: ModelAdmin.AddMachines lxd:N from an admin
// connection, and its deliveries to the machine's own agent, which holds
// 10 WatchContainers watchers (Provisioner v11) on its own connection,
// each with a StringsWatcher.Next pending. An op is the write and its ten
// replies, the agent's ten next Next calls sent: the eleven calls of a
// change. Its allocations are the daemon's and the two clients'; the
// daemon's alone are the window figures of provisionbench watch
// (docs/performance.md, "The cost of a change").
func BenchmarkChangeDelivered(b *testing.B) {
	const k = 10
	d := start(b, nil)
	model := d.Credentials().DefaultModelUUID
	agent := benchAgents(b, d, 1)[0]
	args := params.WatchContainers{Params: make([]params.WatchContainer, k)}
	for w := range args.Params {
		args.Params[w] = params.WatchContainer{MachineTag: agent.tag}
	}
	var res params.StringsWatchResults
	if err := agent.conn.Call(ctxT(b), "Provisioner", 11, "", "WatchContainers", args, &res); err != nil {
		b.Fatal(err)
	}
	if len(res.Results) != k {
		b.Fatalf("WatchContainers: %d results, want %d", len(res.Results), k)
	}
	delivered := make(chan error, k)
	var loop func(w *client.StringsWatcher)
	loop = func(w *client.StringsWatcher) {
		w.GoNext(func(ids []string, err error) {
			if err == nil && len(ids) != 1 {
				err = fmt.Errorf("Next: %d ids %v, want 1", len(ids), ids)
			}
			delivered <- err
			if err == nil {
				loop(w)
			}
		})
	}
	for _, r := range res.Results {
		if r.Error != nil {
			b.Fatal(r.Error)
		}
		loop(client.NewStringsWatcher(agent.conn, r.StringsWatcherId))
	}
	adm := loginAdmin(b, d, model)
	add := params.AddMachinesArgs{Placement: "lxd:" + strings.TrimPrefix(agent.tag, "machine-")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var res params.AddMachinesResult
		if err := adm.Call(ctx, "ModelAdmin", 1, "", "AddMachines", add, &res); err != nil {
			b.Fatal(err)
		}
		for range k {
			if err := <-delivered; err != nil {
				b.Fatal(err)
			}
		}
	}
}
