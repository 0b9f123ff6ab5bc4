package main

import (
	"context"
	"fmt"
	"maps"
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
		return map[string]any{"watchers-per-agent": o.connsWatchers(), "watches": "WatchContainers(self), WatchForModelConfigChanges, alternately",
			"agent-buffers": o.bufferSize}
	},
	prepare: func(ctx context.Context, e *env, n int) error {
		_, err := e.fix.ensureMachines(ctx, n)
		return err
	},
	run: runConns,
	baseline: func(ctx context.Context, e *env, n int) (*values, error) {
		// One daemon's share of the agents: what each daemon holds, and
		// what this process can hold under its open file limit.
		return runConnsBaseline(ctx, e, ceilDiv(n, len(e.targets)))
	},
	ratios: []ratio{
		{"KiB/agent vs idle conn", "daemon KiB/agent", "idle conn KiB/conn"},
		{"live heap + stacks vs idle conn's", "daemon live heap + stacks KiB/agent", "idle conn live heap + stacks KiB/conn"},
		{"KiB/agent vs target", "daemon KiB/agent", "target KiB/agent"},
	},
	notes: func(o *options) []string {
		mem := "memory: the daemon's own RSS (/proc/<pid>/status, or its /metrics) after a forced GC (SIGUSR1: runtime.GC, debug.FreeOSMemory), read before the agents connect, once they are logged in, and once their watchers are open"
		if o.daemonBin != "" || o.credentials != "" {
			mem = "memory: the daemon's RSS (/proc/<pid>/status, or its /metrics), read before the agents connect, once they are logged in, and once their watchers are open, WITHOUT a forced GC (only the tool's own daemon can be asked for one): the readings hold whatever garbage the daemon has not collected and the per-agent figures move with it; for memory figures use --daemon child or inproc"
		}
		return []string{
			mem,
			fmt.Sprintf("KiB/agent logged in = (logged in - before) / agents; KiB/watcher = (watching - logged in) / (agents x %d); daemon KiB/agent = (watching - before) / agents", o.connsWatchers()),
			fmt.Sprintf("each agent: logged in, %d watchers, a Next pending on each, pinging every minute; target: at most 16 KiB per agent + 0.5 KiB per watcher = %.1f KiB/agent", o.connsWatchers(), connsTarget(o.connsWatchers())),
			"baseline: the echo server (same TLS websocket transport) holding the same number of idle connections",
			"live heap + stacks: the live objects after the forced GC and the goroutines' stacks, each process's own (runtime.MemStats HeapAlloc + StackInuse), per agent or connection: what RSS holds whenever the collector runs, without the free slots left in spans that also hold live objects (heap in use less live: how many depends on GOGC and on which size classes the garbage of connecting shared with what stays)",
		}
	},
}

// connsWatchers is the watchers per agent of conns and storm: 2 (what a
// Juju machine agent holds at least) unless --watchers says otherwise.
func (o *options) connsWatchers() int {
	if o.setFlags["watchers"] {
		return o.watchers
	}
	return 2
}

// connsTarget is the daemon's memory target per agent with k watchers,
// KiB: 16 KiB per agent and 0.5 KiB per watcher (docs/performance.md,
// "conns").
func connsTarget(k int) float64 { return 16 + 0.5*float64(k) }

// session is a connected agent with its watchers, each with a Next
// always pending. The Nexts are chained on the connection's reader
// (client.Conn.Go), so a session holds no goroutine of the tool's per
// watcher: 100,000 agents x 2 watchers would otherwise be 200,000 parked
// goroutines and their stacks in the load generator.
type session struct {
	c        *client.Conn
	wg       sync.WaitGroup // one per watcher, done when its Next fails
	watching atomic.Int64   // watchers with a Next loop running
	st       *connectStats  // counts the watch calls answered try again
}

// startSession starts c's pinger and watches on c (watch); st counts
// the watch calls answered try again. The pinger comes first, as the
// reference agent's (internal/agent) comes right after its login: watch
// calls retried at try again, or resumed behind a long history read, may
// take longer than the daemon's ping timeout (3 minutes), which closes an
// agent that has not pinged.
func startSession(ctx context.Context, c *client.Conn, m machineCred, watchers int, st *connectStats) (*session, error) {
	s := &session{c: c, st: st}
	c.StartPinger(time.Minute)
	if err := s.watch(ctx, m, watchers); err != nil {
		return nil, err
	}
	return s, nil
}

// watch opens k watchers: WatchContainers on the agent's own machine and
// WatchForModelConfigChanges, alternately (the containers watchers in one
// bulk call), each with a Next loop until the connection ends. A call, or
// a bulk call's item, answered try again is made again (retryAgain).
func (s *session) watch(ctx context.Context, m machineCred, k int) error {
	c := s.c
	err := retryAgain(ctx, (k+1)/2, 0, s.again, func(idx []int) ([]int, error) {
		args := params.WatchContainers{Params: make([]params.WatchContainer, len(idx))}
		for i := range args.Params {
			args.Params[i] = params.WatchContainer{MachineTag: m.Tag}
		}
		var sres params.StringsWatchResults
		if err := c.Call(ctx, "Provisioner", 11, "", "WatchContainers", args, &sres); err != nil {
			return nil, err
		}
		if len(sres.Results) != len(idx) {
			return nil, fmt.Errorf("WatchContainers: %d results for %d", len(sres.Results), len(idx))
		}
		for _, r := range sres.Results {
			if r.Error == nil {
				s.wg.Add(1)
				s.watching.Add(1)
				s.loopStrings(client.NewStringsWatcher(c, r.StringsWatcherId))
			}
		}
		again, err := againItems(idx, len(sres.Results), func(i int) error {
			if e := sres.Results[i].Error; e != nil {
				return e
			}
			return nil
		})
		if err != nil && !client.IsCode(err, params.CodeTryAgain) {
			return nil, fmt.Errorf("WatchContainers: %w", err)
		}
		return again, err
	})
	if err != nil {
		return err
	}
	for range k / 2 {
		err := retryAgain(ctx, 1, 0, s.again, func([]int) ([]int, error) {
			var nres params.NotifyWatchResult
			err := c.Call(ctx, "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &nres)
			if err == nil && nres.Error != nil {
				err = nres.Error
			}
			if err != nil {
				return nil, err
			}
			s.wg.Add(1)
			s.watching.Add(1)
			s.loopNotify(nres.NotifyWatcherId)
			return nil, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// again counts n calls or items answered try again.
func (s *session) again(n int64) {
	if s.st != nil {
		s.st.tryAgain.Add(n)
	}
}

// loopStrings keeps a Next pending on w until one fails.
func (s *session) loopStrings(w *client.StringsWatcher) {
	w.GoNext(func(_ []string, err error) {
		if err != nil {
			s.watching.Add(-1)
			s.wg.Done()
			return
		}
		s.loopStrings(w)
	})
}

// loopNotify keeps a Next pending on notify watcher id until one fails.
func (s *session) loopNotify(id string) {
	s.c.Go("NotifyWatcher", 1, id, "Next", nil, nil, func(err error) {
		if err != nil {
			s.watching.Add(-1)
			s.wg.Done()
			return
		}
		s.loopNotify(id)
	})
}

// connectSessions connects the agents of ms, 64 at a time, each with
// watchers watchers (0: logged in only, pinging).
func (e *env) connectSessions(ctx context.Context, ms []machineCred, st *connectStats, watchers int) ([]*session, error) {
	ss := make([]*session, len(ms))
	var done atomic.Int64
	phase := fmt.Sprintf("connecting %d agents with %d watchers each", len(ms), watchers)
	if watchers == 0 {
		phase = fmt.Sprintf("connecting and logging in %d agents", len(ms))
	}
	e.o.progress.count(phase, &done, int64(len(ms)), func() string {
		return fmt.Sprintf("(try again %d, connection errors %d)", st.tryAgain.Load(), st.dialErr.Load())
	})
	err := parallel(ctx, len(ms), 64, func(ctx context.Context, i int) error {
		c, err := e.connectAgent(ctx, i, ms[i], st)
		if err != nil {
			return err
		}
		s, err := startSession(ctx, c, ms[i], watchers, st)
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

// memReading is the daemon's memory at one point of a conns run.
type memReading struct {
	rss int64
	rt  map[string]float64
}

func (e *env) readMem() (memReading, error) { return readMemOf(e.t) }

// readMemOf reads daemon t's memory after a collection.
func readMemOf(t *target) (memReading, error) {
	t.settle()
	rss, err := t.rss()
	if err != nil {
		return memReading{}, fmt.Errorf("daemon memory: %w", err)
	}
	return memReading{rss: rss, rt: t.runtimeMem()}, nil
}

// plus is the sum of two readings (of two daemons).
func (m memReading) plus(o memReading) memReading {
	out := memReading{rss: m.rss + o.rss, rt: map[string]float64{}}
	for k, v := range m.rt {
		if w, ok := o.rt[k]; ok {
			out.rt[k] = v + w
		}
	}
	if m.rt == nil {
		maps.Copy(out.rt, o.rt)
	}
	return out
}

func runConns(ctx context.Context, e *env, n int) (*values, error) {
	if e.o.loadgens > 0 {
		return runConnsSpread(ctx, e, n)
	}
	k := e.o.connsWatchers()
	ms, err := e.fix.ensureMachines(ctx, n)
	if err != nil {
		return nil, err
	}
	e.o.progress.set("conns: reading the daemon's memory")
	before, err := e.readMem()
	if err != nil {
		return nil, err
	}
	var st connectStats
	start := time.Now()
	ss, err := e.connectSessions(ctx, ms, &st, 0)
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	defer closeSessions(ss)
	e.o.progress.set(fmt.Sprintf("conns: %d agents logged in; settling", n))
	if err := sleepCtx(ctx, e.o.settle); err != nil {
		return nil, err
	}
	loggedIn, err := e.readMem()
	if err != nil {
		return nil, err
	}
	var watching atomic.Int64
	e.o.progress.count(fmt.Sprintf("conns: opening %d watchers on each of %d agents", k, n), &watching, int64(n), nil)
	wstart := time.Now()
	err = parallel(ctx, n, 64, func(ctx context.Context, i int) error {
		if err := ss[i].watch(ctx, ms[i], k); err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
		watching.Add(1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	wtook := time.Since(wstart)
	e.o.progress.set(fmt.Sprintf("conns: %d agents x %d watchers; settling", n, k))
	if err := sleepCtx(ctx, e.o.settle); err != nil {
		return nil, err
	}
	after, err := e.readMem()
	if err != nil {
		return nil, err
	}
	v := newValues()
	v.set("connect time", "s", took.Seconds())
	v.set("agents connected/s", "", float64(n)/took.Seconds())
	v.set("watchers opened/s", "", float64(n*k)/wtook.Seconds())
	v.set("try again (logins, watch calls)", "", float64(st.tryAgain.Load()))
	connsFigures(v, before, loggedIn, after, n, k)
	e.setConnEnds(v)
	return v, nil
}

// connsFigures sets the memory figures of n agents with k watchers each
// from the readings before them, with them logged in and with their
// watchers open.
func connsFigures(v *values, before, loggedIn, after memReading, n, k int) {
	v.set("daemon RSS before", "MiB", float64(before.rss)/(1<<20))
	v.set("daemon RSS logged in", "MiB", float64(loggedIn.rss)/(1<<20))
	v.set("daemon RSS after", "MiB", float64(after.rss)/(1<<20))
	v.set("daemon KiB/agent logged in", "KiB", float64(loggedIn.rss-before.rss)/1024/float64(n))
	v.set("daemon KiB/watcher", "KiB", float64(after.rss-loggedIn.rss)/1024/float64(n*k))
	v.set("daemon KiB/agent", "KiB", float64(after.rss-before.rss)/1024/float64(n))
	v.set("target KiB/agent", "KiB", connsTarget(k))
	for _, m := range runtimeMemMetrics {
		b, okb := before.rt[m.metric]
		a, oka := after.rt[m.metric]
		if okb && oka && m.row != "" {
			v.set(m.row, m.unit, (a-b)/m.div/float64(n))
		}
	}
	// What the agents keep alive, whenever the collector last ran: live
	// objects and stacks (the row the idle connection's is compared with).
	if rt := [2]map[string]float64{before.rt, after.rt}; len(rt[0]) > 0 && len(rt[1]) > 0 {
		kept := func(m map[string]float64) float64 {
			return m["go_memstats_heap_alloc_bytes"] + m["go_memstats_stack_inuse_bytes"]
		}
		v.set("daemon live heap + stacks KiB/agent", "KiB", (kept(after.rt)-kept(before.rt))/1024/float64(n))
	}
	// The heap's free pages not (yet) returned to the OS: idle less
	// released. After a settle that returned everything, about 0.
	if rt := [2]map[string]float64{before.rt, after.rt}; len(rt[0]) > 0 && len(rt[1]) > 0 {
		free := func(m map[string]float64) float64 {
			return m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"]
		}
		v.set("  heap free, not returned KiB/agent", "KiB", (free(after.rt)-free(before.rt))/1024/float64(n))
	}
	if goal, ok := after.rt[heapGoal]; ok {
		v.set("daemon heap goal after", "MiB", goal/(1<<20))
	}
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
	liveBefore, stacksBefore := es.settle()
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
	liveAfter, stacksAfter := es.settle()
	after, err := procRSS(es.pid)
	if err != nil {
		return nil, err
	}
	v := newValues()
	v.set("idle conn KiB/conn", "KiB", float64(after-before)/1024/float64(n))
	if liveAfter > 0 {
		v.set("idle conn live heap + stacks KiB/conn", "KiB", float64(liveAfter+stacksAfter-liveBefore-stacksBefore)/1024/float64(n))
	}
	return v, nil
}

// runtimeMemMetrics break the daemon's per-agent memory down, from its Go
// runtime metrics in /metrics: the heap's spans in use and, within them,
// the live objects (after the forced GC; the rest is free slots of spans
// that also hold live objects), goroutine stacks, the heap's free pages
// not yet returned to the OS (idle less released), the runtime's own
// metadata, goroutines. A metric without a row is read for a derived one.
var runtimeMemMetrics = []struct {
	metric, row, unit string
	div               float64
}{
	{"go_memstats_heap_inuse_bytes", "  of which heap KiB/agent", "KiB", 1024},
	{"go_memstats_heap_alloc_bytes", "    of which live objects KiB/agent", "KiB", 1024},
	{heapLive, "    live after the last collection KiB/agent", "KiB", 1024},
	{"go_memstats_stack_inuse_bytes", "  of which stacks KiB/agent", "KiB", 1024},
	{"go_memstats_heap_idle_bytes", "", "KiB", 1024}, // with heap_released: "heap free, not returned"
	{"go_memstats_heap_released_bytes", "", "KiB", 1024},
	{"go_memstats_mspan_inuse_bytes", "  runtime span metadata KiB/agent", "KiB", 1024},
	{"go_memstats_gc_sys_bytes", "  runtime GC metadata KiB/agent", "KiB", 1024},
	{"go_goroutines", "daemon goroutines/agent", "", 1},
	{heapGoal, "", "MiB", 1 << 20}, // "daemon heap goal after"
}

// runtimeMem scrapes runtimeMemMetrics; metrics it cannot read are left
// out (a daemon without /metrics).
func (t *target) runtimeMem() map[string]float64 {
	names := make([]string, len(runtimeMemMetrics))
	for i, m := range runtimeMemMetrics {
		names[i] = m.metric
	}
	out, err := t.scrapeSeries(names)
	if err != nil {
		return map[string]float64{}
	}
	return out
}
