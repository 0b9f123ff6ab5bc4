package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

var stormWorkload = &workload{
	sizeName: "agents",
	sizes:    "100,1000,10000",
	describe: func(o *options) map[string]any {
		return map[string]any{"watchers-per-agent": o.connsWatchers(), "restart": "SIGTERM (graceful), then start on the same data dir",
			"backoff": "full jitter, 100 ms x 2^attempt, at most 5 s", "login-rate": fmt.Sprintf("%d burst, 1 per %s", o.loginRateMax, o.loginRateRefill)}
	},
	prepare: func(ctx context.Context, e *env, n int) error {
		if e.t.mode == modeExternal {
			return fmt.Errorf("storm restarts the daemon: let the tool start it (no --credentials)")
		}
		_, err := e.fix.ensureMachines(ctx, n)
		return err
	},
	run: runStorm,
	notes: func(*options) []string {
		return []string{
			"all back: from the restart beginning until every agent is logged in again with its watchers; 10,000 back: until the 10,000th is (all of them below 10,000 agents); targets: 100,000 agents all back within 60 s, 10,000 within 10 s, no error but try again",
			"listening: when a socket listens on the daemon's port (/proc/net/tcp, read every 1 ms); /health after listening: from then until the first 200 from /health (asked in a loop, one at a time, a new TLS connection each from 127.0.0.1; target: 1 s); /health slowest: the longest of the probes after that one until all are back; both watched from a process of their own (internal-health), not behind the agents' goroutines",
			"daemon restart: from the restart beginning until the new daemon's first 200 from /health (the health watch's)",
			"connection errors are dials refused or cut while the daemon is down; other errors must be 0",
			"CPU per agent back (/proc, over the agents): the restarted daemons' since their start, the agents' processes' (the load generators, or this one) and the tool's etcd member's from the restart (all of it: the reconnections refused while the daemons were down too); CPU of the storm over the box's cores: their sum over the cores, the least wall time the storm could take on this box however its work were scheduled (all back near it: the box's CPU is the limit)",
		}
	},
}

// stormFirst is the count of agents back the storm's first target is
// about ("10,000 within 10 s").
const stormFirst = 10000

func runStorm(ctx context.Context, e *env, n int) (*values, error) {
	if e.o.loadgens > 0 {
		return runStormSpread(ctx, e, n)
	}
	ms, err := e.fix.ensureMachines(ctx, n)
	if err != nil {
		return nil, err
	}
	k := e.o.connsWatchers()
	var first connectStats
	ss, err := e.connectSessions(ctx, ms, &first, k)
	if err != nil {
		return nil, err
	}
	// Each agent, once its connection ends, reconnects with backoff and
	// watches again.
	var (
		restartAt atomic.Pointer[time.Time]
		back      atomic.Int64
		lat       latencies
		mu        sync.Mutex // guards current
		current   = ss
	)
	drops := newDropWatch(ctx)
	defer func() {
		drops.stop()
		mu.Lock()
		closeSessions(current)
		mu.Unlock()
	}()
	var st connectStats
	for i, s := range ss {
		drops.on(s.c, func(ctx context.Context) {
			for attempt := 0; ; attempt++ {
				c, err := e.connectAgent(ctx, i, ms[i], &st)
				if err != nil {
					return // cancelled
				}
				ns, err := startSession(ctx, c, ms[i], k, &st)
				if err != nil {
					c.Close()
					if ctx.Err() != nil {
						return
					}
					st.other(err)
					if sleepCtx(ctx, backoff(attempt)) != nil {
						return
					}
					continue
				}
				mu.Lock()
				current[i] = ns
				mu.Unlock()
				if t0 := restartAt.Load(); t0 != nil {
					lat.add(time.Since(*t0))
				}
				back.Add(1)
				return
			}
		})
	}
	e.o.progress.count(fmt.Sprintf("storm: restarting the daemon under %d agents; back", n), &back, int64(n), func() string {
		return fmt.Sprintf("(try again %d, connection errors %d, other %d)",
			st.tryAgain.Load(), st.dialErr.Load(), st.otherErr.Load())
	})
	if e.t.mode == modeExternal {
		return nil, fmt.Errorf("cannot restart a daemon given by --credentials; let the tool start one")
	}
	e.t.foldEnds()
	scpu := startStormCPU([]int{os.Getpid()}, e.etcdPID())
	t0 := time.Now()
	ticks0 := readCPUTicks()
	restartAt.Store(&t0)
	if err := e.t.stop(); err != nil {
		fmt.Fprintf(e.o.stderr, "provisionbench: daemon stop: %v\n", err)
	}
	e.t.lastStop = time.Since(t0)
	hw, err := e.t.watchHealth(ctx)
	if err != nil {
		return nil, err
	}
	finished := false
	defer func() {
		if !finished {
			_, _ = hw.finish()
		}
	}()
	if err := e.t.startWaiting(ctx, false); err != nil {
		return nil, err
	}
	timeout := time.After(10 * time.Minute)
	for back.Load() < int64(n) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-e.t.exited:
			return nil, fmt.Errorf("the restarted daemon exited: %v", e.t.waitErr)
		case <-timeout:
			return nil, fmt.Errorf("only %d of %d agents back after 10 minutes", back.Load(), n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	all := time.Since(t0)
	stolen := readCPUTicks().stolenSince(ticks0)
	cpu := newValues()
	scpu.set(cpu, e.daemonPIDs(), n)
	finished = true
	hf, err := hw.finish()
	if err != nil {
		return nil, err
	}
	ds := lat.snapshot()
	slices.Sort(ds)
	tenK := ds[min(len(ds), stormFirst)-1]
	if hf.firstOK.IsZero() {
		return nil, fmt.Errorf("the restarted daemon's /health never answered 200")
	}
	ready := hf.firstOK.Sub(t0)
	v := newValues()
	v.set("daemon restart", "s", ready.Seconds())
	v.set("  of which stopping", "s", e.t.lastStop.Seconds())
	if !hf.listening.IsZero() {
		listening := hf.listening.Sub(t0)
		v.set("listening after", "s", listening.Seconds())
		if !hf.firstOK.IsZero() {
			v.set("/health after listening", "s", hf.firstOK.Sub(hf.listening).Seconds())
		}
		v.set("10,000 back after listening", "s", (tenK - listening).Seconds())
		v.set("all back after listening", "s", (all - listening).Seconds())
	}
	v.set("/health slowest during the storm", "s", hf.maxProbe.Seconds())
	v.set("  its TCP connect", "s", hf.slowest.connect.Seconds())
	v.set("  its TLS handshake", "s", hf.slowest.handshake.Seconds())
	v.set("  its answer after the request", "s", hf.slowest.answer.Seconds())
	v.set("/health probes failed", "", float64(hf.failed))
	v.set("10,000 back", "s", tenK.Seconds())
	v.set("all back", "s", all.Seconds())
	v.set("all back after ready", "s", (all - ready).Seconds())
	v.set("agent back p50", "s", percentile(ds, 50).Seconds())
	v.set("agent back p99", "s", percentile(ds, 99).Seconds())
	v.set("logins/s after ready", "", float64(n)/max(all-ready, time.Millisecond).Seconds())
	v.set("try again", "", float64(st.tryAgain.Load()))
	v.set("connection errors", "", float64(st.dialErr.Load()))
	v.set("  of which refused (not listening)", "", float64(st.refused.Load()))
	v.set("  of which no free source port", "", float64(st.noPort.Load()))
	v.set("  of which HTTP 503 (a daemon draining, or over its share: rebalancing)", "", float64(st.unavailable.Load()))
	v.set("  of which cut or timed out", "", float64(st.dialErr.Load()-st.refused.Load()-st.noPort.Load()-st.unavailable.Load()))
	v.set("other errors", "", float64(st.otherErr.Load()))
	if !math.IsNaN(stolen) {
		v.set("CPU stolen by the host", "%", stolen) // from the restart to all back
	}
	v.merge(cpu)
	if p := st.lastOther.Load(); p != nil {
		fmt.Fprintf(e.o.stderr, "provisionbench: storm: last other error: %s\n", *p)
	}
	e.setConnEnds(v)
	return v, nil
}
