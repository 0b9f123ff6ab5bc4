package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

var connsWorkload = &workload{
	sizeName: "agents",
	sizes:    "100,1000,10000",
	describe: func(o *options) map[string]any {
		return map[string]any{"watchers-per-agent": 2, "watches": "WatchContainers(self), WatchForModelConfigChanges",
			"agent-buffers": o.bufferSize}
	},
	prepare: func(ctx context.Context, e *env, n int) error {
		_, err := e.fix.ensureMachines(ctx, n)
		return err
	},
	run:      runConns,
	baseline: runConnsBaseline,
	ratios: []ratio{
		{"KiB/agent vs idle conn", "daemon KiB/agent", "idle conn KiB/conn"},
	},
	notes: func(o *options) []string {
		return []string{
			"memory: the daemon's own RSS (/proc/<pid>/status, or its /metrics) after a GC, after the agents connected minus before, over agents",
			"each agent: logged in, 2 watchers, a Next blocked on each, pinging every minute; target: at most 40 KiB per connection + 1 KiB per watcher = 42 KiB/agent",
			"baseline: the echo server (same TLS websocket transport) holding the same number of idle connections",
		}
	},
}

// session is a connected agent with its two watchers and a Next blocked
// on each.
type session struct {
	c  *client.Conn
	wg sync.WaitGroup
}

// startSession watches on c: the agent's containers and the model config,
// each with a Next loop, until the connection ends.
func startSession(ctx context.Context, c *client.Conn, m machineCred) (*session, error) {
	var sres params.StringsWatchResults
	err := c.Call(ctx, "Provisioner", 11, "", "WatchContainers",
		params.WatchContainers{Params: []params.WatchContainer{{MachineTag: m.Tag}}}, &sres)
	if err != nil {
		return nil, err
	}
	if len(sres.Results) != 1 || sres.Results[0].Error != nil {
		return nil, fmt.Errorf("WatchContainers: %+v", sres.Results)
	}
	var nres params.NotifyWatchResult
	if err := c.Call(ctx, "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &nres); err != nil {
		return nil, err
	}
	if nres.Error != nil {
		return nil, nres.Error
	}
	s := &session{c: c}
	sw := client.NewStringsWatcher(c, sres.Results[0].StringsWatcherId)
	nw := client.NewNotifyWatcher(c, nres.NotifyWatcherId)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		for {
			if _, err := sw.Next(context.Background()); err != nil {
				return
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		for {
			if err := nw.Next(context.Background()); err != nil {
				return
			}
		}
	}()
	c.StartPinger(time.Minute)
	return s, nil
}

// connectSessions connects n agents with their watchers, 64 at a time.
func (e *env) connectSessions(ctx context.Context, ms []machineCred, st *connectStats) ([]*session, error) {
	ss := make([]*session, len(ms))
	var done atomic.Int64
	e.o.progress.setWith(fmt.Sprintf("connecting %d agents with 2 watchers each", len(ms)), func() string {
		return fmt.Sprintf("%d/%d (try again: %d)", done.Load(), len(ms), st.tryAgain.Load())
	})
	err := parallel(ctx, len(ms), 64, func(ctx context.Context, i int) error {
		c, err := e.connectAgent(ctx, i, ms[i], st)
		if err != nil {
			return err
		}
		s, err := startSession(ctx, c, ms[i])
		if err != nil {
			c.Close()
			return err
		}
		ss[i] = s
		done.Add(1)
		return nil
	})
	if err != nil {
		closeSessions(ss)
		return nil, err
	}
	return ss, nil
}

func closeSessions(ss []*session) {
	conns := make([]*client.Conn, 0, len(ss))
	for _, s := range ss {
		if s != nil {
			conns = append(conns, s.c)
		}
	}
	closeAll(conns)
	for _, s := range ss {
		if s != nil {
			s.wg.Wait()
		}
	}
}

func runConns(ctx context.Context, e *env, n int) (*values, error) {
	ms, err := e.fix.ensureMachines(ctx, n)
	if err != nil {
		return nil, err
	}
	e.o.progress.set("conns: reading the daemon's memory")
	e.t.settle()
	before, err := e.t.rss()
	if err != nil {
		return nil, fmt.Errorf("daemon memory: %w", err)
	}
	rtBefore := e.t.runtimeMem()
	var st connectStats
	start := time.Now()
	ss, err := e.connectSessions(ctx, ms, &st)
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	defer closeSessions(ss)
	e.o.progress.set(fmt.Sprintf("conns: %d agents connected; settling", n))
	if err := sleepCtx(ctx, e.o.settle); err != nil {
		return nil, err
	}
	e.t.settle()
	after, err := e.t.rss()
	if err != nil {
		return nil, fmt.Errorf("daemon memory: %w", err)
	}
	v := newValues()
	v.set("connect time", "s", took.Seconds())
	v.set("agents connected/s", "", float64(n)/took.Seconds())
	v.set("login try again", "", float64(st.tryAgain.Load()))
	v.set("daemon RSS before", "MiB", float64(before)/(1<<20))
	v.set("daemon RSS after", "MiB", float64(after)/(1<<20))
	v.set("daemon KiB/agent", "KiB", float64(after-before)/1024/float64(n))
	rtAfter := e.t.runtimeMem()
	for _, m := range runtimeMemMetrics {
		b, okb := rtBefore[m.metric]
		a, oka := rtAfter[m.metric]
		if okb && oka {
			v.set(m.row, m.unit, (a-b)/m.div/float64(n))
		}
	}
	return v, nil
}

// runConnsBaseline: the echo server's RSS per idle TLS websocket
// connection, with the agents' client settings.
func runConnsBaseline(ctx context.Context, e *env, n int) (*values, error) {
	es, err := e.echo(ctx)
	if err != nil {
		return nil, err
	}
	if es.cmd == nil {
		return nil, fmt.Errorf("idle connection memory needs the echo server in its own process (not --daemon inproc)")
	}
	es.settle()
	before, err := procRSS(es.pid)
	if err != nil {
		return nil, err
	}
	conns, err := e.dialEcho(ctx, es, n)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	if err := sleepCtx(ctx, e.o.settle); err != nil {
		return nil, err
	}
	es.settle()
	after, err := procRSS(es.pid)
	if err != nil {
		return nil, err
	}
	v := newValues()
	v.set("idle conn KiB/conn", "KiB", float64(after-before)/1024/float64(n))
	return v, nil
}

// runtimeMemMetrics break the daemon's per-agent memory down, from its Go
// runtime metrics in /metrics (heap in use, goroutine stacks, goroutines).
var runtimeMemMetrics = []struct {
	metric, row, unit string
	div               float64
}{
	{"go_memstats_heap_inuse_bytes", "  of which heap KiB/agent", "KiB", 1024},
	{"go_memstats_stack_inuse_bytes", "  of which stacks KiB/agent", "KiB", 1024},
	{"go_goroutines", "daemon goroutines/agent", "", 1},
}

// runtimeMem scrapes runtimeMemMetrics; metrics it cannot read are left
// out (a daemon without /metrics).
func (t *target) runtimeMem() map[string]float64 {
	out := make(map[string]float64)
	for _, m := range runtimeMemMetrics {
		if v, err := t.scrape(m.metric); err == nil {
			out[m.metric] = v
		}
	}
	return out
}
