package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

var rpcWorkload = &workload{
	sizeName: "agents",
	sizes:    "1,16,64",
	describe: func(o *options) map[string]any {
		return map[string]any{"calls": "Provisioner.Life/InstanceId on self", "duration": o.duration.String()}
	},
	prepare: func(ctx context.Context, e *env, n int) error {
		_, err := e.fix.ensureMachines(ctx, n)
		return err
	},
	run: runRPC,
	baseline: func(ctx context.Context, e *env, n int) (*values, error) {
		if e.etcdMode() {
			return runRPCBoltBaseline(ctx, e, n)
		}
		return runRPCBaseline(ctx, e, n)
	},
	ratios: []ratio{
		{"calls/s vs echo", "calls/s", "echo calls/s"},
		{"p99 vs echo p99", "p99 latency", "echo p99 latency"},
		{"calls/s vs bbolt", "calls/s", "bbolt calls/s"},
		{"p99 vs bbolt p99", "p99 latency", "bbolt p99 latency"},
	},
	notes: func(o *options) []string {
		alloc := "daemon bytes and objects allocated per call: the daemons' go_memstats_alloc_bytes_total and go_memstats_mallocs_total over the window, over the calls counted in it (with --daemon inproc they include the agents', which share the process)"
		if o.store == daemon.StoreEtcd {
			return []string{
				alloc,
				"reads are served from each daemon's replica of the prefix; agents spread over the daemons",
				"baseline: the same agents and calls on a daemon on bbolt started the same way in the same run (target: >= 0.7 of its calls/s)",
			}
		}
		return []string{alloc, "baseline: a JSON echo server on the same TLS websocket transport, answering from its read loop; targets: 64 agents >= 0.9 of its calls/s, 1 agent p99 < 0.3 ms"}
	},
}

// connectAgents connects and logs in n machine agents, 64 at a time.
func (e *env) connectAgents(ctx context.Context, ms []machineCred, st *connectStats) ([]*client.Conn, error) {
	conns := make([]*client.Conn, len(ms))
	var done atomic.Int64
	e.o.progress.setWith(fmt.Sprintf("connecting %d agents", len(ms)), func() string {
		return fmt.Sprintf("%d/%d (try again: %d)", done.Load(), len(ms), st.tryAgain.Load())
	})
	err := parallel(ctx, len(ms), 64, func(ctx context.Context, i int) error {
		c, err := e.connectAgent(ctx, i, ms[i], st)
		if err != nil {
			return err
		}
		c.StartPinger(time.Minute)
		conns[i] = c
		done.Add(1)
		return nil
	})
	if err != nil {
		closeAll(conns)
		return nil, err
	}
	return conns, nil
}

func closeAll(conns []*client.Conn) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for _, c := range conns {
		if c == nil {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			c.Close()
			<-sem
		}()
	}
	wg.Wait()
}

// loopResult is what a closed loop measured.
type loopResult struct {
	calls   int
	errors  int
	elapsed time.Duration
	lat     []time.Duration
}

// closedLoop runs call on every connection, one call at a time each, for
// warm (not counted) and then d (counted).
func closedLoop(ctx context.Context, n int, warm, d time.Duration, window func(start bool), call func(ctx context.Context, i, k int) error) loopResult {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		counting atomic.Bool
		stop     atomic.Bool
		lat      latencies
		errs     atomic.Int64
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := make([]time.Duration, 0, 4096)
			for k := 0; !stop.Load(); k++ {
				t0 := time.Now()
				err := call(ctx, i, k)
				el := time.Since(t0)
				if !counting.Load() || stop.Load() {
					continue
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				own = append(own, el)
			}
			lat.addAll(own)
		}()
	}
	_ = sleepCtx(ctx, warm)
	if window != nil {
		window(true)
	}
	counting.Store(true)
	start := time.Now()
	_ = sleepCtx(ctx, d)
	stop.Store(true)
	elapsed := time.Since(start)
	if window != nil {
		window(false)
	}
	wg.Wait()
	ds := lat.snapshot()
	return loopResult{calls: len(ds), errors: int(errs.Load()), elapsed: elapsed, lat: ds}
}

func warmup(d time.Duration) time.Duration { return min(time.Second, d/5) }

func (r loopResult) set(v *values, prefix string) {
	v.set(prefix+"calls/s", "", float64(r.calls)/r.elapsed.Seconds())
	v.set(prefix+"p50 latency", "ms", ms(percentile(r.lat, 50)))
	v.set(prefix+"p99 latency", "ms", ms(percentile(r.lat, 99)))
	v.set(prefix+"errors", "", float64(r.errors))
}

func runRPC(ctx context.Context, e *env, n int) (*values, error) {
	ms, err := e.fix.ensureMachines(ctx, n)
	if err != nil {
		return nil, err
	}
	var st connectStats
	conns, err := e.connectAgents(ctx, ms, &st)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	e.o.progress.set(fmt.Sprintf("rpc: %d agents calling", n))
	args := make([]params.Entities, n)
	for i, m := range ms {
		args[i] = params.Entities{Entities: []params.Entity{{Tag: m.Tag}}}
	}
	win := e.o.newToolWindow()
	dw := newDaemonsWindow(e.targets)
	window := func(start bool) {
		if start {
			win.mark(true)
			dw.open()
			return
		}
		dw.close()
		win.mark(false)
	}
	r := closedLoop(ctx, n, warmup(e.o.duration), e.o.duration, window, func(ctx context.Context, i, k int) error {
		if k%2 == 0 {
			var res params.LifeResults
			if err := conns[i].Call(ctx, "Provisioner", 11, "", "Life", args[i], &res); err != nil {
				return err
			}
			if len(res.Results) != 1 || res.Results[0].Error != nil {
				return fmt.Errorf("result of Life: %+v", res)
			}
			return nil
		}
		var res params.StringResults
		if err := conns[i].Call(ctx, "Provisioner", 11, "", "InstanceId", args[i], &res); err != nil {
			return err
		}
		if len(res.Results) != 1 || res.Results[0].Error != nil {
			return fmt.Errorf("InstanceId: %+v", res)
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	v := newValues()
	r.set(v, "")
	win.set(v, "")
	// Counted calls and those in flight as the window closed: within n.
	dw.set(v, map[string]float64{"call": float64(r.calls)}, []string{"call"})
	e.setConnEnds(v)
	return v, nil
}

// runRPCBaseline runs the same closed loop, same messages, against the
// echo server.
func runRPCBaseline(ctx context.Context, e *env, n int) (*values, error) {
	es, err := e.echo(ctx)
	if err != nil {
		return nil, err
	}
	conns, err := e.dialEcho(ctx, es, n)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	args := make([]params.Entities, n)
	for i := range n {
		args[i] = params.Entities{Entities: []params.Entity{{Tag: fmt.Sprintf("machine-%d", i)}}}
	}
	win := e.o.newToolWindow()
	r := closedLoop(ctx, n, warmup(e.o.duration), e.o.duration, win.mark, func(ctx context.Context, i, k int) error {
		method := "Life"
		if k%2 == 1 {
			method = "InstanceId"
		}
		var res params.Entities
		return conns[i].Call(ctx, "Provisioner", 11, "", method, args[i], &res)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	v := newValues()
	r.set(v, "echo ")
	win.set(v, "echo ")
	return v, nil
}

// echo starts the baseline echo server once per run of the tool.
func (e *env) echo(ctx context.Context) (*echoServer, error) {
	if e.echoSrv != nil {
		return e.echoSrv, nil
	}
	es, err := startEcho(ctx, e.t.mode == modeInproc, e.o.memProfile)
	if err != nil {
		return nil, err
	}
	e.echoSrv = es
	return es, nil
}

func (e *env) dialEcho(ctx context.Context, es *echoServer, n int) ([]*client.Conn, error) {
	conns := make([]*client.Conn, n)
	err := parallel(ctx, n, 64, func(ctx context.Context, i int) error {
		cfg := e.agentConfig("", i)
		cfg.Addr, cfg.CACert = es.addr, es.ca
		c, err := client.Dial(ctx, cfg)
		if err != nil {
			return err
		}
		conns[i] = c
		return nil
	})
	if err != nil {
		closeAll(conns)
		return nil, err
	}
	return conns, nil
}
