package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

var watchWorkload = &workload{
	windows:  true,
	sizeName: "agents",
	sizes:    "10,100,1000",
	describe: func(o *options) map[string]any {
		return map[string]any{"watchers-per-agent": o.watchers, "rate": o.rate, "duration": o.duration.String(),
			"watch": "Provisioner.WatchContainers(self, any type)", "change": "ModelAdmin.AddMachines lxd:<agent's machine>"}
	},
	prepare: func(ctx context.Context, e *env, n int) error {
		_, err := e.fix.ensureMachines(ctx, n)
		return err
	},
	run:      runWatch,
	baseline: runWatchBaseline,
	ratios: []ratio{
		{"p99 vs etcd p99", "p99 latency", "etcd p99 latency"},
		{"p99 vs etcd p99 + echo p99", "p99 latency", "etcd p99 + echo p99 latency"},
		{"p99 vs echo p99", "p99 latency", "echo p99 latency"},
	},
	diffs: []ratio{
		{"p99 over etcd p99", "p99 latency", "etcd p99 latency"},
		{"p50 over etcd p50", "p50 latency", "etcd p50 latency"},
		{"p99 over etcd p99 + echo p99", "p99 latency", "etcd p99 + echo p99 latency"},
	},
	notes: func(o *options) []string {
		if o.store == daemon.StoreEtcd {
			return []string{
				"latency: from the driver issuing the write to the agent's Next returning with the change; with --daemons 2 or more the driver writes through the last daemon and the agents watch on the others (the change reaches them through etcd's watch)",
				"write latency: the driver's AddMachines round trip (its etcd transaction, and its own daemon applying it)",
				"baseline: etcd's own watch at the same shape, made on etcd's gRPC watch streams directly (no clientv3 goroutine or channel per watch: those cost this process gigabytes and minutes at a million watches, and are not etcd's fan-out, which the baseline measures): a key per agent, --watchers watches on each (as many watchers as the run's) over min(agents, 64) clients, one stream each (etcd multiplexes watches on a stream, so they need no more open files), one more client putting at --rate, at most one put in flight per key; latency from the put issued to the event received by the stream's reader",
				echoNote,
				"etcd p99 + echo p99: the floor of a change through a daemon: etcd's own watch plus a round trip on the daemon's transport (the driver's write to its daemon, the event to the agent); p99 over it is what the daemons add",
				"target: 10,000 watchers at 100 changes/s, p99 at most etcd's p99 + 2 ms, none lost",
				"CPU per change: the daemons' CPU time (/proc, all of them) and this process's (the agents, the driver, the baselines' clients), over the changes committed",
				daemonGCNote,
			}
		}
		return []string{
			"latency: from the driver issuing the write to the agent's Next returning with the change",
			"write latency: the driver's AddMachines round trip; the daemon publishes a commit to the watchers before it answers the writer, so what latency adds to it is the fan-out to the agents",
			"daemon AddMachines, commit: the daemon's /metrics histograms over the run (request read to reply queued; bbolt commit with fsync), as the upper bound of the bucket holding the percentile",
			"CPU per change: CPU time (/proc) of the daemon and of this process (the agents and the driver) during the run, over the changes committed; each change is one write and --watchers deliveries",
			echoNote,
			"peer: one embedded etcd 3.6 member on this kind of machine, 10,000 watchers over 1,000 keys, 100 puts/s: p50 about 2 ms, p99 about 4.5-5 ms",
			"target: 10,000 agents x 10 watchers at 1,000 changes/s, p99 at most 5 ms, none lost, no spurious wake-up",
			daemonGCNote,
		}
	},
}

// echoNote says what the watch's echo baseline is.
const echoNote = "baseline (--baseline): echo p50/p99: one connection's closed loop of a small call (SetInstanceStatus) to the JSON echo server on the daemon's transport (TLS websocket, a child process like the daemon) for --duration, in the same run: the transport's round trip alone"

// runWatchBaseline is the watch's same-run baselines: on etcd, etcd's own
// watch at the same shape; on both stores, the echo round trip.
func runWatchBaseline(ctx context.Context, e *env, n int) (*values, error) {
	v := newValues()
	if e.etcdMode() {
		ev, err := runWatchEtcdBaseline(ctx, e, n)
		if err != nil {
			return nil, err
		}
		v = ev
	}
	r, err := echoLoop(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("echo: %w", err)
	}
	echo99 := ms(percentile(r.lat, 99))
	v.set("echo p50 latency", "ms", ms(percentile(r.lat, 50)))
	v.set("echo p99 latency", "ms", echo99)
	if etcd99, ok := v.m["etcd p99 latency"]; ok {
		v.set("etcd p99 + echo p99 latency", "ms", etcd99+echo99)
	}
	return v, nil
}

// watchRun is the shared book-keeping of one watch run.
type watchRun struct {
	mu       sync.Mutex
	issued   map[string]time.Time // container id -> when its add was issued
	inflight map[string]time.Time // machine id -> when its in-flight add was issued
	added    map[string][]string  // machine id -> containers added (acknowledged)
	failures map[string]int       // a failed write's error -> how many failed so

	lat        latencies
	writeLat   latencies // the driver's AddMachines round trips
	deliveries atomic.Int64
	spurious   atomic.Int64
	duplicates atomic.Int64
	unknown    atomic.Int64
}

// issuedAt returns when the add of container id was issued.
func (w *watchRun) issuedAt(id string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.issued[id]; ok {
		return t, true
	}
	parent, _, _ := strings.Cut(id, "/")
	t, ok := w.inflight[parent]
	return t, ok
}

func runWatch(ctx context.Context, e *env, n int) (*values, error) {
	if e.o.loadgens > 0 {
		return runWatchSpread(ctx, e, n)
	}
	mcs, err := e.fix.ensureMachines(ctx, n)
	if err != nil {
		return nil, err
	}
	if err := e.fix.conns(ctx); err != nil {
		return nil, err
	}
	// Across daemons: the driver writes through the last daemon and the
	// agents watch on the others.
	driver, driverT := e.fix.admin, e.t
	if len(e.targets) > 1 {
		driverT = e.targets[len(e.targets)-1]
		e.agentsOn = e.targets[:len(e.targets)-1]
		defer func() { e.agentsOn = nil }()
		c, err := driverT.dialAdmin(ctx, e.fix.model)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		driver = c
	}
	var st connectStats
	conns, err := e.connectAgents(ctx, mcs, &st)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)

	// Each agent watches its own containers K times (one bulk call).
	k := e.o.watchers
	type watch struct {
		w    *client.StringsWatcher
		m    string
		seen map[string]bool
	}
	watches := make([][]*watch, n)
	e.o.progress.set(fmt.Sprintf("watch: starting %d watchers", n*k))
	err = parallel(ctx, n, 64, func(ctx context.Context, i int) error {
		args := params.WatchContainers{}
		for range k {
			args.Params = append(args.Params, params.WatchContainer{MachineTag: mcs[i].Tag})
		}
		var res params.StringsWatchResults
		if err := conns[i].Call(ctx, "Provisioner", 11, "", "WatchContainers", args, &res); err != nil {
			return err
		}
		for _, r := range res.Results {
			if r.Error != nil {
				return r.Error
			}
			w := &watch{w: client.NewStringsWatcher(conns[i], r.StringsWatcherId), m: mcs[i].ID, seen: map[string]bool{}}
			for _, id := range r.Changes {
				w.seen[id] = true
			}
			watches[i] = append(watches[i], w)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	run := &watchRun{issued: map[string]time.Time{}, inflight: map[string]time.Time{}, added: map[string][]string{},
		failures: map[string]int{}}
	// Each watcher keeps one Next pending: the reply's completion (run by
	// the connection's reader, see client.Conn.Go) records it and starts
	// the next Next. No goroutine per watcher: the load generator shares
	// the cores with the daemon, and 10,000 parked goroutines (their stacks
	// regrown after every GC) were a good part of its CPU.
	var (
		stopping atomic.Bool
		wg       sync.WaitGroup
	)
	for _, ws := range watches {
		for _, w := range ws {
			wg.Add(1)
			var next func()
			next = func() {
				w.w.GoNext(func(ids []string, err error) {
					now := time.Now()
					if err != nil {
						wg.Done()
						return
					}
					fresh := 0
					for _, id := range ids {
						if w.seen[id] {
							run.duplicates.Add(1)
							continue
						}
						w.seen[id] = true
						fresh++
						if t0, ok := run.issuedAt(id); ok {
							run.lat.add(now.Sub(t0))
							run.deliveries.Add(1)
						} else {
							run.unknown.Add(1)
						}
					}
					if fresh == 0 {
						run.spurious.Add(1)
					}
					if stopping.Load() {
						wg.Done()
						return
					}
					next()
				})
			}
			next()
		}
	}

	// The driver: an open loop at the rate, round robin over the agents'
	// machines, at most one add in flight per machine (so a change's id
	// is known before its reply).
	var issuedN, failed atomic.Int64
	e.o.progress.setWith(fmt.Sprintf("watch: %d agents x %d watchers, %.0f changes/s", n, k, e.o.rate), func() string {
		return fmt.Sprintf("issued %d, delivered %d", issuedN.Load(), run.deliveries.Load())
	})
	daemonSide := startDaemonSide(driverT)
	cpu := newCPUWindow(e.daemonPIDs(), nil, e.o.newToolWindow())
	cpu.profile = e.o.windowProf != ""
	cpu.gc, cpu.agents = newDaemonGC(driverT), n
	cpu.mark(true)
	elapsed := run.drive(ctx, nil, e.o.rate, e.o.duration, mcs, func(int) *client.Conn { return driver }, &issuedN, &failed)

	// Late events: wait until every watcher has seen every change, or
	// the settle time passes.
	expected := int64(0)
	for _, ids := range run.added {
		expected += int64(len(ids) * k)
	}
	deadline := time.Now().Add(e.o.settle)
	for run.deliveries.Load() < expected && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	cpu.mark(false)
	daemonSide.stop()
	stopping.Store(true)
	ends := e.readConnEnds() // before the agents close
	closeAll(conns)          // ends the pending Next calls
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	lost := 0
	for _, ws := range watches {
		for _, w := range ws {
			for _, id := range run.added[w.m] {
				if !w.seen[id] {
					lost++
				}
			}
		}
	}
	for msg, count := range run.failures {
		fmt.Fprintf(e.o.stderr, "watch: %d agents: %d writes failed: %s\n", n, count, msg)
	}
	ds, ws := run.lat.snapshot(), run.writeLat.snapshot()
	changes := float64(issuedN.Load() - failed.Load())
	v := newValues()
	v.set("watchers", "", float64(n*k))
	v.set("changes/s", "", changes/elapsed.Seconds())
	v.set("deliveries", "", float64(run.deliveries.Load()))
	v.set("p50 latency", "ms", ms(percentile(ds, 50)))
	v.set("p99 latency", "ms", ms(percentile(ds, 99)))
	v.set("max latency", "ms", ms(percentile(ds, 100)))
	v.set("write p50 latency", "ms", ms(percentile(ws, 50)))
	v.set("write p99 latency", "ms", ms(percentile(ws, 99)))
	daemonSide.set(v)
	cpu.set(v, "", "change", changes, "ms")
	v.set("lost", "", float64(lost))
	v.set("spurious wake-ups", "", float64(run.spurious.Load()))
	v.set("duplicates", "", float64(run.duplicates.Load()))
	v.set("failed writes", "", float64(failed.Load()))
	ends.set(v)
	return v, nil
}

// drive is the watch's driver: an open loop at rate changes a second for
// d or until stop is closed (nil: never), each a container added
// (ModelAdmin.AddMachines lxd:M) through through(j) to machine mcs[j],
// round robin over them, at most one add in flight per machine (so a
// change's id is known before its reply). It returns the time it drove,
// once every add it issued has its reply.
func (run *watchRun) drive(ctx context.Context, stop <-chan struct{}, rate float64, d time.Duration, mcs []machineCred,
	through func(j int) *client.Conn, issuedN, failed *atomic.Int64) time.Duration {
	n := len(mcs)
	interval := time.Duration(float64(time.Second) / rate)
	var dwg sync.WaitGroup
	start := time.Now()
	next := 0
loop:
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= d {
			break
		}
		select {
		case <-stop:
			break loop
		default:
		}
		if err := sleepCtx(ctx, time.Until(at)); err != nil {
			break
		}
		j := -1
		run.mu.Lock()
		for tries := 0; tries < n; tries++ {
			cand := next % n
			next++
			if _, busy := run.inflight[mcs[cand].ID]; !busy {
				j = cand
				break
			}
		}
		if j < 0 {
			run.mu.Unlock()
			continue // every machine has an add in flight: skip this tick
		}
		m := mcs[j].ID
		t0 := time.Now()
		run.inflight[m] = t0
		run.mu.Unlock()
		issuedN.Add(1)
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			var res params.AddMachinesResult
			err := through(j).Call(ctx, "ModelAdmin", 1, "", "AddMachines",
				params.AddMachinesArgs{Placement: "lxd:" + m}, &res)
			if err == nil {
				run.writeLat.add(time.Since(t0))
			}
			run.mu.Lock()
			defer run.mu.Unlock()
			delete(run.inflight, m)
			if err != nil || len(res.Machines) != 1 {
				failed.Add(1)
				msg := fmt.Sprintf("%d machines in the reply", len(res.Machines))
				if err != nil {
					msg = err.Error()
				}
				run.failures[msg]++
				return
			}
			id := res.Machines[0]
			run.issued[id] = t0
			run.added[m] = append(run.added[m], id)
		}()
	}
	elapsed := time.Since(start)
	dwg.Wait()
	return elapsed
}

// daemonSide reads the daemon's own view of the run from its /metrics:
// how long AddMachines took from its request being read to its reply
// being queued (provisiond_request_duration_seconds), and how long its
// commits took (provisiond_commit_duration_seconds, fsync included).
// Both are histograms with coarse buckets: the figures are the upper
// bound of the bucket holding the percentile.
type daemonSide struct {
	t              *target
	write0, write1 histogram
	commit0        histogram
	commit1        histogram
	ok             bool
}

var addMachinesLabels = []string{`facade="ModelAdmin"`, `method="AddMachines"`}

func startDaemonSide(t *target) *daemonSide {
	d := &daemonSide{t: t}
	var err1, err2 error
	d.commit0, err1 = t.scrapeHist("provisiond_commit_duration_seconds")
	d.write0, err2 = t.scrapeHist("provisiond_request_duration_seconds", addMachinesLabels...)
	d.ok = err1 == nil && err2 == nil
	return d
}

func (d *daemonSide) stop() {
	if !d.ok {
		return
	}
	var err1, err2 error
	d.commit1, err1 = d.t.scrapeHist("provisiond_commit_duration_seconds")
	d.write1, err2 = d.t.scrapeHist("provisiond_request_duration_seconds", addMachinesLabels...)
	d.ok = err1 == nil && err2 == nil
}

func (d *daemonSide) set(v *values) {
	if !d.ok {
		return
	}
	w, c := d.write1.since(d.write0), d.commit1.since(d.commit0)
	setBound := func(name string, h histogram, p float64) {
		if b := h.quantileBound(p); !math.IsNaN(b) && !math.IsInf(b, 0) { // JSON has neither
			v.set(name, "ms", 1000*b)
		}
	}
	setBound("daemon AddMachines p50 at most", w, 50)
	setBound("daemon AddMachines p99 at most", w, 99)
	setBound("commit p99 at most", c, 99)
}
