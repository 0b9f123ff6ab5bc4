package main

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/provisiond/provisiond/internal/daemon"
)

// How a run is spread over processes: the agents over load generators
// (--loadgens, loadgen.go) and, on etcd, over daemons (--daemons). Every
// process here may hold at most 20,000 open files, so the defaults are as
// many of each as that needs.

const (
	// agentsPerLoadgen is the most agents the default puts in one load
	// generator process.
	agentsPerLoadgen = 15000
	// agentsPerDaemon is the most agents the default puts on one daemon
	// (etcd mode).
	agentsPerDaemon = 17000
)

// spreadWorkloads are the workloads that run their agents in load
// generator processes when --loadgens is 1 or more.
var spreadWorkloads = map[string]bool{"conns": true, "watch": true, "failover": true, "storm": true}

// totalAgents is the most agents a run holds at once: failover's sizes
// are per daemon.
func (o *options) totalAgents() int {
	if o.workload == "failover" {
		return maxInt(o.sizes) * o.daemons
	}
	return maxInt(o.sizes)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// resolveShape sets the defaults of --daemons (etcd mode) and --loadgens
// from the run's size, and checks them.
func (o *options) resolveShape() error {
	if o.store == daemon.StoreEtcd && !o.setFlags["daemons"] && o.workload != "failover" {
		o.daemons = max(1, ceilDiv(maxInt(o.sizes), agentsPerDaemon))
	}
	if !o.setFlags["loadgens"] {
		o.loadgens = 0 // the agents in this process, as before
		if spreadWorkloads[o.workload] {
			switch auto := ceilDiv(o.totalAgents(), agentsPerLoadgen); {
			case auto > 1:
				o.loadgens = auto
			case o.daemons > 1 && (o.workload == "conns" || o.workload == "storm"):
				o.loadgens = 1 // their spread form is the one that knows several daemons
			case o.resume:
				o.loadgens = 1 // the spread form's agents keep revisions and count what is lost
			case o.idleWindow && o.workload == "watch":
				o.loadgens = 1 // the agents' own processes: their pings are the daemons', not this process's
			}
		}
	}
	switch {
	case o.loadgens < 0:
		return errors.New("--loadgens must be 0 (the agents in this process) or more")
	case o.loadgens > 0 && !spreadWorkloads[o.workload]:
		return fmt.Errorf("--loadgens: %s runs its agents in this process (conns, watch, failover and storm spread them)", o.workload)
	case o.loadgens == 0 && o.daemons > 1 && (o.workload == "conns" || o.workload == "storm"):
		return fmt.Errorf("%s over several daemons runs its agents in load generator processes: --loadgens 1 or more", o.workload)
	case o.loadgens > o.totalAgents():
		return fmt.Errorf("--loadgens %d: more load generators than agents (%d)", o.loadgens, o.totalAgents())
	case o.resume && o.workload != "failover":
		return errors.New("--resume is a failover's: the moved agents resume their watchers")
	case o.resume && o.loadgens == 0:
		return errors.New("failover --resume runs its agents in load generator processes: --loadgens 1 or more")
	case o.loadgenNice > 0 && o.loadgens == 0:
		return errors.New("--loadgen-nice is the load generator processes': --loadgens 1 or more")
	case o.idleWindow && o.workload != "watch":
		return errors.New("--idle-window is a watch's: a window without changes before the changes' window")
	case o.idleWindow && o.loadgens == 0:
		return errors.New("watch --idle-window runs its agents in load generator processes: --loadgens 1 or more")
	case o.rolling && o.workload != "storm":
		return errors.New("--rolling is a storm's: restart the daemons one at a time")
	case o.rolling && (o.daemons < 2 || o.loadgens == 0):
		return errors.New("storm --rolling restarts several daemons one at a time: --store etcd --daemons 2 or more (and --loadgens 1 or more)")
	}
	return nil
}

// division is how a run's agents are divided.
type division struct {
	agents          int
	loadgens        int // 0: in this process
	perLoadgen      int // the most agents in one load generator
	addrsPerLoadgen int // source addresses each load generator has
	daemons         int
	perDaemon       int // agents on each daemon at the start
	peakPerDaemon   int // the most one daemon may hold (after a failover)
}

func (o *options) division(agents int) division {
	d := division{agents: agents, loadgens: o.loadgens, daemons: max(1, o.daemons)}
	d.perDaemon = ceilDiv(agents, d.daemons)
	d.peakPerDaemon = d.perDaemon
	if d.daemons > 1 && (o.workload == "failover" || o.workload == "storm") {
		d.peakPerDaemon = ceilDiv(agents, d.daemons-1)
	}
	if d.loadgens > 0 {
		d.perLoadgen = ceilDiv(agents, d.loadgens)
		d.addrsPerLoadgen = ceilDiv(d.perLoadgen, max(1, o.sources.perAddr))
	}
	return d
}

// describe says how the work was divided, for the report and stderr.
func (d division) describe() string {
	s := ""
	if d.loadgens > 0 {
		s = fmt.Sprintf("%d agents in %d load generator processes of at most %d (contiguous blocks; each binds %d loopback source address(es) of its own, load generator K from 127.0.0.%d+%d(K-1))",
			d.agents, d.loadgens, d.perLoadgen, d.addrsPerLoadgen, 2, d.addrsPerLoadgen)
	} else {
		s = fmt.Sprintf("%d agents in this process", d.agents)
	}
	s += fmt.Sprintf("; %d daemon(s), about %d agents each (agent i on daemon i mod %d)", d.daemons, d.perDaemon, d.daemons)
	if d.peakPerDaemon != d.perDaemon {
		s += fmt.Sprintf(", up to %d once one is down", d.peakPerDaemon)
	}
	return s
}

// filesPerProcess is the open files the busiest process of a spread run
// needs beyond fileMargin: a load generator's agents, a daemon's (at
// its peak), or the parent's echo baseline connections (one daemon's
// share).
func (d division) filesPerProcess() int {
	return max(d.perLoadgen, d.peakPerDaemon)
}

// loadgenPool starts the run's load generators once.
func (e *env) loadgenPool(ctx context.Context) (*loadgens, error) {
	if e.lg != nil {
		return e.lg, nil
	}
	e.o.progress.set(fmt.Sprintf("starting %d load generators", e.o.loadgens))
	lg, err := startLoadgens(ctx, e)
	if err != nil {
		return nil, err
	}
	e.lg = lg
	return lg, nil
}

// pids are the load generators' processes.
func (l *loadgens) pids() []int {
	var out []int
	for _, p := range l.procs {
		out = append(out, p.cmd.Process.Pid)
	}
	return out
}

// daemonsWindow reads every daemon's allocations and collections over a
// measuring window from its /metrics (the Go collector's counters): the
// machine-independent cost of the work done in it.
type daemonsWindow struct {
	targets    []*target
	start, end []map[string]float64
}

const (
	allocBytes   = "go_memstats_alloc_bytes_total"
	allocObjects = "go_memstats_mallocs_total"
)

var daemonsWindowSeries = []string{allocBytes, allocObjects, gcCycles}

func newDaemonsWindow(ts []*target) *daemonsWindow {
	return &daemonsWindow{targets: ts}
}

func (w *daemonsWindow) read() []map[string]float64 {
	out := make([]map[string]float64, len(w.targets))
	for i, t := range w.targets {
		out[i], _ = t.scrapeSeries(daemonsWindowSeries)
	}
	return out
}

func (w *daemonsWindow) open()  { w.start = w.read() }
func (w *daemonsWindow) close() { w.end = w.read() }

// delta is series name's growth over the window on daemon i (ok false
// where it was not read).
func (w *daemonsWindow) delta(i int, name string) (float64, bool) {
	if w.start == nil || w.end == nil {
		return 0, false
	}
	a, oka := w.start[i][name]
	b, okb := w.end[i][name]
	return b - a, oka && okb
}

// total is series name's growth over the window, all daemons.
func (w *daemonsWindow) total(name string) (float64, bool) {
	sum, ok := 0.0, true
	for i := range w.targets {
		d, dok := w.delta(i, name)
		sum += d
		ok = ok && dok
	}
	return sum, ok
}

// set adds the bytes and objects the daemons allocated per unit (per
// change, per delivery, per call) and their collections in the window.
func (w *daemonsWindow) set(v *values, per map[string]float64, order []string) {
	b, okb := w.total(allocBytes)
	o, oko := w.total(allocObjects)
	for _, unit := range order {
		n := per[unit]
		if n <= 0 {
			continue
		}
		if okb {
			v.set("daemon bytes allocated per "+unit, "B", b/n)
		}
		if oko {
			v.set("daemon objects allocated per "+unit, "", o/n)
		}
	}
	if c, ok := w.total(gcCycles); ok {
		v.set("daemon GC cycles (all daemons)", "", c)
	}
	if len(w.targets) > 1 {
		for i := range w.targets {
			if c, ok := w.delta(i, gcCycles); ok {
				v.set(fmt.Sprintf("daemon %d GC cycles", i+1), "", c)
			}
		}
	}
}

// liveHeaps collects garbage on every daemon (settle) and returns each
// one's live heap after it, bytes (NaN where not read).
func liveHeaps(ts []*target) []float64 {
	out := make([]float64, len(ts))
	for i, t := range ts {
		t.settle()
		m, err := t.scrapeSeries([]string{heapLive})
		out[i] = math.NaN()
		if v, ok := m[heapLive]; err == nil && ok {
			out[i] = v
		}
	}
	return out
}

// spreadNotes say what the figures of a spread run are, beside (and where
// they differ, before) the workload's own notes.
func spreadNotes(o *options) []string {
	if o.loadgens == 0 {
		return nil
	}
	notes := []string{"spread: the agents run in --loadgens load generator processes (this binary re-executed), each a contiguous block of them from loopback source addresses of its own, driven by this process over their stdin and stdout; each reports what its agents saw (deliveries and reconnections with their wall-clock times) and this process computes every figure over all of them"}
	if limit := loadgenMemoryLimit(o.loadgens); limit > 0 {
		notes = append(notes, fmt.Sprintf("each load generator's soft memory limit (GOMEMLIMIT) is %.2f GiB, five eighths of the box's memory shared among them (set $GOMEMLIMIT to choose another)", float64(limit)/(1<<30)))
	}
	switch o.workload {
	case "conns":
		if o.daemons > 1 {
			notes = append(notes, "several daemons: the memory rows are all daemons together (per agent: over every agent), then each daemon's (agents on it, KiB/agent, live heap after a collection per agent, before the agents (the daemon's replica of the model and its state) and with them, goroutines/agent, RSS); the baseline's idle connections are one daemon's share of the agents")
		}
		notes = append(notes, "etcd (conns and watch on etcd): the tool's member's RSS, its database's size and the part in use (etcd's status), and that per machine of the model: etcd holds the model, not the agents")
	case "watch":
		notes = append(notes,
			"spread watch: agent j watches on daemon j mod D and its changes are written through daemon j+1 mod D, so with several daemons every change crosses daemons through etcd and every daemon writes; latency from the driver issuing the write to the agent's Next returning, across load generator processes by the wall clock; daemon K p50/p99: of the watchers on daemon K",
			"machine-independent: daemon bytes and objects allocated per change and per delivery (go_memstats_alloc_bytes_total and go_memstats_mallocs_total of every daemon over the window), daemon GC cycles in it, the daemons' live heap after a forced collection with the watchers open against before the agents (per agent, per watcher), the load generators' GC cycles (their collector kept out of the window as this process's is), CPU stolen by the host in the window (/proc/stat)")
		if o.idleWindow {
			notes = append(notes, "idle window (--idle-window): just before the changes, as long as --duration, every agent connected with its watchers and no change written; idle rows are its rates (CPU, the daemons' allocations, the Pinger.Ping calls they answered); each \"less idle\" row is the per-change figure with the idle rate over the changes' window taken out: what the change itself cost, without the fleet's pings and upkeep")
		}
	case "failover":
		notes = append(notes, "spread failover: the agents watch their own containers (WatchContainers, --watchers, default 2) and the driver adds containers through the first daemon at --rate from just before the kill until every moved agent is back: lost counts each watcher that saw a change made to its machine neither in a Next nor in the first event of its watcher opened again after the move (must be 0); longest without a daemon: the longest any moved agent went from seeing its connection end to being back with its watchers")
	case "storm":
		notes = append(notes, "spread storm: the agents watch their own containers; each keeps every API address it has seen (the addresses of each login, and those it knew before) and reconnects as a Juju agent does: the addresses shuffled, dialled one more every 200 ms whether or not the one before answered, the first connection made kept and any other closed (counted in client_closed), backing off once all failed; at most --dials (default 2,048; 0: no bound) dials under way at once in each load generator (the box's memory: one waiting for a saturated daemon's handshake holds its TLS key shares); without --rolling every daemon stops (SIGTERM) and starts again at once; with --rolling one at a time, each started again once its agents are back on the others (none left on it), the daemons rebalancing (provisiond's --rebalance: one over its share refuses new connections with HTTP 503 and hands agents a few at a time to one with room; after the last restart the tool waits until no daemon holds more than its share and margin: rebalanced, from the last restart; with --rebalance=false the agents stay where they went and the last daemon restarted ends with none: agents per daemon after); longest without a daemon: the longest any agent went from seeing its connection end to being back with its watchers (target for --rolling: 5 s)")
	}
	return notes
}
