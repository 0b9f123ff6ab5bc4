package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state/store/boltstore/rawbolt"
)

var writeWorkload = &workload{
	windows:  true,
	sizeName: "writers",
	sizes:    "1,64,256",
	describe: func(o *options) map[string]any {
		return map[string]any{"op": o.op, "duration": o.duration.String()}
	},
	prepare: func(ctx context.Context, e *env, n int) error {
		if e.o.op != "units" {
			if _, err := e.fix.ensureMachines(ctx, n); err != nil {
				return err
			}
		}
		if e.o.op != "status" && e.t.caasModel == "" {
			return fmt.Errorf("--op %s needs CAAS applications, which only a daemon this tool starts is seeded with (use --op status with --credentials or --daemon-bin)", e.o.op)
		}
		return nil
	},
	run: runWrite,
	baseline: func(ctx context.Context, e *env, n int) (*values, error) {
		if e.etcdMode() {
			return runWriteEtcdBaseline(ctx, e, n)
		}
		return runWriteBaseline(ctx, e, n)
	},
	ratios: []ratio{
		{"writes/s vs raw serial", "writes/s", "raw serial commits/s"},
		{"writes/s vs raw Batch", "writes/s", "raw Batch commits/s"},
		{"writes/s vs raw serial + echo", "writes/s", "raw serial + echo writes/s"},
		{"writes/s vs raw etcd txn", "writes/s", "raw etcd txn/s"},
		{"writes/s vs raw etcd txn + echo", "writes/s", "raw etcd txn + echo writes/s"},
	},
	notes: func(o *options) []string {
		if o.store == daemon.StoreEtcd {
			return []string{
				"every write is answered after its etcd transaction is committed (on a quorum, fsync) and the daemon's replica has applied it; writers spread over the daemons",
				"baseline: etcd's own client, the same number of writers, each one transaction at a time on a key of its own (one compare of its mod revision, one 512-byte put), through as many clients as there are daemons",
				"baseline, 1 writer: the echo server answering the same SetInstanceStatus message, one at a time; raw etcd txn + echo = 1 / (1/raw etcd txn + 1/echo)",
				"targets: 64 and 256 writers >= 0.8 of raw etcd txn; 1 writer >= 0.8 of raw etcd txn + echo",
				"writes per commit: Updates per etcd transaction (grouped when commits are in flight), from the first daemon's /metrics",
				daemonGCNote,
			}
		}
		return []string{
			"every write is answered after its commit is on disk (fsync); commits and writes/commit from the daemon's /metrics",
			"baseline: raw bbolt on the same file system, one put per transaction: serial Update (1 writer), Batch with the same number of writers",
			"baseline, 1 writer: the echo server answering the same SetInstanceStatus message, one at a time; raw serial + echo = 1 / (1/raw serial + 1/echo), the floor of a durable write over the wire",
			"targets: 1 writer >= 0.9 of raw serial + echo; 64 and 256 writers >= 2 x raw Batch (and above etcd's durable puts, about 6,300/s at 64 and 7,100/s at 256)",
			daemonGCNote,
		}
	},
}

// writer is one writer's connection and its write.
type writer struct {
	c     *client.Conn
	write func(ctx context.Context, k int) error
}

func (e *env) writers(ctx context.Context, n int) ([]writer, error) {
	var ms []machineCred
	if e.o.op != "units" {
		var err error
		if ms, err = e.fix.ensureMachines(ctx, n); err != nil {
			return nil, err
		}
	}
	ws := make([]writer, n)
	var st connectStats
	err := parallel(ctx, n, 64, func(ctx context.Context, i int) error {
		op := e.o.op
		if op == "mixed" {
			op = []string{"status", "units"}[i%2]
		}
		if op == "status" {
			c, err := e.connectAgent(ctx, i, ms[i], &st)
			if err != nil {
				return err
			}
			args := func(k int) params.SetStatus {
				return params.SetStatus{Entities: []params.EntityStatusArgs{{
					Tag: ms[i].Tag, Status: "running", Info: "bench " + strconv.Itoa(k),
				}}}
			}
			ws[i] = writer{c: c, write: func(ctx context.Context, k int) error {
				var res params.ErrorResults
				if err := c.Call(ctx, "Provisioner", 11, "", "SetInstanceStatus", args(k), &res); err != nil {
					return err
				}
				if len(res.Results) != 1 || res.Results[0].Error != nil {
					return fmt.Errorf("SetInstanceStatus: %+v", res.Results)
				}
				return nil
			}}
			return nil
		}
		c, err := e.agentTarget(i).dialController(ctx, e.t.caasModel)
		if err != nil {
			return err
		}
		c.StartPinger(time.Minute)
		app := benchApp(i)
		ws[i] = writer{c: c, write: func(ctx context.Context, k int) error {
			args := params.UpdateApplicationUnitArgs{Args: []params.UpdateApplicationUnits{{
				ApplicationTag: "application-" + app,
				Units: []params.ApplicationUnitParams{{
					ProviderId: app + "-pod-0", Address: "10.0.0.1", Ports: []string{"80"},
					Status: "running", Info: "bench " + strconv.Itoa(k),
				}},
			}}}
			var res params.UpdateApplicationUnitResults
			if err := c.Call(ctx, "CAASUnitProvisioner", 2, "", "UpdateApplicationsUnits", args, &res); err != nil {
				return err
			}
			if len(res.Results) != 1 || res.Results[0].Error != nil {
				return fmt.Errorf("UpdateApplicationsUnits: %+v", res.Results)
			}
			return nil
		}}
		return nil
	})
	if err != nil {
		for _, w := range ws {
			if w.c != nil {
				w.c.Close()
			}
		}
		return nil, err
	}
	return ws, nil
}

func runWrite(ctx context.Context, e *env, n int) (*values, error) {
	e.o.progress.set(fmt.Sprintf("write: connecting %d writers", n))
	ws, err := e.writers(ctx, n)
	if err != nil {
		return nil, err
	}
	defer func() {
		conns := make([]*client.Conn, len(ws))
		for i, w := range ws {
			conns[i] = w.c
		}
		closeAll(conns)
	}()
	// The first write of each writer may create its unit: not measured.
	for _, w := range ws {
		if err := w.write(ctx, -1); err != nil {
			return nil, err
		}
	}
	e.o.progress.set(fmt.Sprintf("write: %d writers", n))
	commits0, _ := e.t.scrape("provisiond_commit_duration_seconds_count")
	fns0, _ := e.t.scrape("provisiond_commit_batch_size_sum")
	var et *etcdTarget
	if e.etcdMode() {
		et = e.cl.etcd
	}
	cpu := newCPUWindow(e.daemonPIDs(), et, e.o.newToolWindow())
	cpu.profile = e.o.windowProf != ""
	cpu.gc = newDaemonGC(e.t)
	r := closedLoop(ctx, n, warmup(e.o.duration), e.o.duration, cpu.mark, func(ctx context.Context, i, k int) error {
		return ws[i].write(ctx, k)
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	commits1, err1 := e.t.scrape("provisiond_commit_duration_seconds_count")
	fns1, err2 := e.t.scrape("provisiond_commit_batch_size_sum")
	v := newValues()
	v.set("writes/s", "", float64(r.calls)/r.elapsed.Seconds())
	v.set("p50 latency", "ms", ms(percentile(r.lat, 50)))
	v.set("p99 latency", "ms", ms(percentile(r.lat, 99)))
	v.set("errors", "", float64(r.errors))
	cpu.set(v, "", "write", float64(r.calls), "µs")
	if err1 == nil && err2 == nil && commits1 > commits0 {
		// Over warm-up and measurement both: the shape, not the rate.
		v.set("writes per commit", "", (fns1-fns0)/(commits1-commits0))
	}
	e.setConnEnds(v)
	return v, nil
}

// runWriteBaseline measures raw bbolt commits on the file system of the
// daemon's data dir: serial (1 writer, Update) and Batch (n writers).
func runWriteBaseline(ctx context.Context, e *env, n int) (*values, error) {
	parent := os.TempDir()
	if e.t.dataDir != "" {
		parent = filepath.Dir(e.t.dataDir)
	}
	dir, err := os.MkdirTemp(parent, "provisionbench-raw-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	v := newValues()
	const valueSize = 512 // about a machine status record
	// Raw bbolt runs in this process: each bench is a window.
	win := e.o.newToolWindow()
	win.mark(true)
	serial, err := rawbolt.RawCommitBench(filepath.Join(dir, "serial.db"), 1, false, valueSize, e.o.duration)
	win.mark(false)
	if err != nil {
		return nil, err
	}
	v.set("raw serial commits/s", "", serial.PerSecond())
	v.set("raw serial p50", "ms", ms(percentile(serial.Latencies, 50)))
	win.mark(true)
	batch, err := rawbolt.RawCommitBench(filepath.Join(dir, "batch.db"), n, true, valueSize, e.o.duration)
	win.mark(false)
	if err != nil {
		return nil, err
	}
	v.set("raw Batch commits/s", "", batch.PerSecond())
	v.set("raw Batch p99", "ms", ms(percentile(batch.Latencies, 99)))
	if n == 1 && serial.PerSecond() > 0 {
		// A lone writer's floor: one raw serial commit plus one round
		// trip of the same message on the same transport.
		echo, err := echoRoundTrips(ctx, e)
		if err != nil {
			return nil, err
		}
		v.set("echo round trips/s", "", echo)
		if echo > 0 {
			v.set("raw serial + echo writes/s", "", 1/(1/serial.PerSecond()+1/echo))
		}
	}
	return v, ctx.Err()
}

// echoRoundTrips runs one connection's closed loop of SetInstanceStatus
// messages against the echo server and returns its calls/s.
func echoRoundTrips(ctx context.Context, e *env) (float64, error) {
	r, err := echoLoop(ctx, e)
	if err != nil || r.elapsed <= 0 {
		return 0, err
	}
	return float64(r.calls) / r.elapsed.Seconds(), nil
}

// echoLoop runs one connection's closed loop of SetInstanceStatus
// messages against the echo server for --duration: the round trip of a
// small message on the daemon's transport (TLS websocket), alone.
func echoLoop(ctx context.Context, e *env) (loopResult, error) {
	es, err := e.echo(ctx)
	if err != nil {
		return loopResult{}, err
	}
	conns, err := e.dialEcho(ctx, es, 1)
	if err != nil {
		return loopResult{}, err
	}
	defer closeAll(conns)
	r := closedLoop(ctx, 1, warmup(e.o.duration), e.o.duration, e.o.newToolWindow().mark, func(ctx context.Context, _, k int) error {
		args := params.SetStatus{Entities: []params.EntityStatusArgs{{
			Tag: "machine-0", Status: "running", Info: "bench " + strconv.Itoa(k),
		}}}
		var res params.SetStatus
		return conns[0].Call(ctx, "Provisioner", 11, "", "SetInstanceStatus", args, &res)
	})
	if ctx.Err() != nil {
		return loopResult{}, ctx.Err()
	}
	if r.errors > 0 {
		return loopResult{}, fmt.Errorf("echo: %d of %d calls failed", r.errors, r.calls+r.errors)
	}
	return r, nil
}

// cpuWindow reads the CPU time (/proc) the daemons, the tool's etcd member
// and this process (the agents, the writers or a baseline's clients) use
// between mark(true) and mark(false) (a closed loop's window callback).
type cpuWindow struct {
	names [3]string
	pids  [3][]int // none: not measured (not known, or in this process)
	t0    [3]time.Duration
	used  [3]time.Duration
	ok    [3]bool
	// profile: the daemons (child processes started with
	// --window-cpuprofile) profile the window: mark signals them
	// (SIGUSR2) just before its start reading and just after its end one.
	profile bool
	// tool keeps this process's collector out of the window and reads
	// the CPU the host took (loadgengc.go); its collection as the window
	// opens comes before the start readings.
	tool *toolWindow
	// gc, when set, reads the daemon's collector over the window
	// (daemongc.go), its live heap per agent over agents when that is
	// more than 0.
	gc     *daemonGC
	agents int
}

// newCPUWindow measures the daemons (none: not measured), et's member
// when it is a child of this process, and this process, in the window tool
// keeps this process's collector out of.
func newCPUWindow(daemons []int, et *etcdTarget, tool *toolWindow) *cpuWindow {
	w := &cpuWindow{names: [3]string{"daemon", "etcd", "load generator"}, tool: tool}
	self := os.Getpid()
	w.pids[2] = []int{self}
	switch {
	case slices.Contains(daemons, self):
		w.names[2] = "daemon + load generator" // one process
	case len(daemons) > 0:
		w.pids[0] = daemons
	}
	if et != nil && et.pid != 0 {
		w.pids[1] = []int{et.pid}
	}
	return w
}

func (w *cpuWindow) mark(start bool) {
	if start {
		w.tool.mark(true)
		w.gc.open()
		w.signalProfile()
	} else {
		defer w.tool.mark(false)
		defer w.gc.close()
		defer w.signalProfile()
	}
	for i, pids := range w.pids {
		if len(pids) == 0 {
			continue
		}
		d, err := sumCPU(pids)
		switch {
		case start:
			w.t0[i], w.ok[i] = d, err == nil
		case w.ok[i] && err == nil:
			w.used[i] = d - w.t0[i]
		default:
			w.ok[i] = false
		}
	}
}

// signalProfile starts or stops the daemons' window CPU profiles.
func (w *cpuWindow) signalProfile() {
	if !w.profile {
		return
	}
	for _, pid := range w.pids[0] {
		_ = syscall.Kill(pid, syscall.SIGUSR2)
	}
}

// set adds "<prefix><process> CPU per <op>" in unit ("ms" or "µs") for
// what was measured over ops operations.
func (w *cpuWindow) set(v *values, prefix, op string, ops float64, unit string) {
	if ops <= 0 {
		return
	}
	scale := 1.0 // µs
	if unit == "ms" {
		scale = 1e-3
	}
	for i := range w.pids {
		if w.ok[i] {
			v.set(prefix+w.names[i]+" CPU per "+op, unit, float64(w.used[i].Microseconds())*scale/ops)
		}
	}
	w.tool.set(v, prefix)
	w.gc.set(v, prefix, w.agents)
}

// sumCPU is the CPU time the processes pids have used.
func sumCPU(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}
