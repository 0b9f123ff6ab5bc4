package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"github.com/provisiond/provisiond/internal/connlimit"
)

// The load generator's own garbage collector.
//
// The tool runs every simulated agent in one process. At 10,000 agents its
// heap is hundreds of MiB of small objects (connections, TLS states,
// pending calls), and a collection of it marks for hundreds of
// milliseconds, with a mark worker on every P that would otherwise idle:
// for that time the tool takes cores from the daemon it shares them
// with, and its own goroutines, which read the replies and take the
// latencies, wait for the marker. At 10,000 agents x 10 watchers, with
// the daemon's own collector off, the watch p99 was 4.44 ms with the
// tool's collector and 2.63 ms without it (docs/performance.md, "what the
// watch tail is made of"). Real agents are separate processes, each with a heap of its own,
// on other machines.
//
// So by default (--loadgen-gc quiet) the tool collects its garbage just
// before each measuring window and turns its collector off inside it,
// bounded by a memory limit of what it holds then plus gcHeadroom: a
// window that allocates more than that is collected anyway. Every
// windowed figure reports "load generator GC cycles", the collections
// that ran in the window, so a run in which the bound was reached says
// so. Outside the windows (machines made, agents connecting and logging
// in, a storm, memory readings) the collector runs as usual. The
// baselines the tool measures in this process or through it (raw bbolt,
// raw etcd, the echo server's clients) get the same windows.
// --loadgen-gc go leaves Go's collector as $GOGC and $GOMEMLIMIT set it.
//
// A daemon (and the etcd member the tool starts with it) in this process,
// --daemon inproc, shares the collector: there the tool leaves it alone,
// since turning it off would spare the daemon its own collections.

const (
	loadgenGCQuiet = "quiet" // collect before each window, not in it
	loadgenGCGo    = "go"    // Go's collector as configured
)

// gcHeadroomMax bounds what a window may allocate before the collector
// runs in it: at most this, and at most an eighth of the memory a process
// here may use (connlimit.MemoryLimit: MemTotal or the cgroup's limit).
const gcHeadroomMax = 4 << 30

// toolWindow is what the tool does and reads at the edges of one
// measuring window (mark(true) as it opens, mark(false) as it closes):
// it keeps its own collector out of the window and counts the collections
// that ran in it, and it reads the share of the machine's CPU time the
// host took from it (steal: this machine is a virtual one whose host
// throttles it under sustained load, which the figures must show). Not
// safe for concurrent use: a window is opened and closed by the goroutine
// that runs it.
type toolWindow struct {
	quiet bool

	percent int   // the GC percent to restore
	limit   int64 // the memory limit to restore
	cycles0 uint64
	ticks0  cpuTicks

	cycles   uint64  // collections in the window
	stolen   float64 // steal over all CPU time in the window, percent (NaN: not known)
	measured bool
}

// newToolWindow returns the window of the run's --loadgen-gc.
func (o *options) newToolWindow() *toolWindow {
	return &toolWindow{quiet: o.loadgenGC == loadgenGCQuiet && !o.daemonInProcess()}
}

// mark opens (start) or closes the window; a closed loop's window
// callback.
func (w *toolWindow) mark(start bool) {
	if start {
		w.open()
	} else {
		w.close()
	}
}

func (w *toolWindow) open() {
	if w.quiet {
		runtime.GC()
		// What the memory limit counts: mapped and not returned.
		held := readRuntimeMetric("/memory/classes/total:bytes") - readRuntimeMetric("/memory/classes/heap/released:bytes")
		headroom := gcHeadroom()
		if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
			// A load generator of several (loadgenMemoryLimit) stays
			// within its share of the box.
			headroom = min(headroom, max(limit-int64(held), 256<<20))
		}
		w.percent = debug.SetGCPercent(-1)
		w.limit = debug.SetMemoryLimit(int64(held) + headroom)
	}
	w.cycles0 = readRuntimeMetric("/gc/cycles/total:gc-cycles")
	w.ticks0 = readCPUTicks()
	w.measured = false
}

func (w *toolWindow) close() {
	w.cycles = readRuntimeMetric("/gc/cycles/total:gc-cycles") - w.cycles0
	w.stolen = readCPUTicks().stolenSince(w.ticks0)
	w.measured = true
	if w.quiet {
		debug.SetMemoryLimit(w.limit)
		debug.SetGCPercent(w.percent)
	}
}

// set adds the window's collections and stolen CPU to v.
func (w *toolWindow) set(v *values, prefix string) {
	if !w.measured {
		return
	}
	v.set(prefix+"load generator GC cycles", "", float64(w.cycles))
	if !math.IsNaN(w.stolen) {
		v.set(prefix+"CPU stolen by the host", "%", w.stolen)
	}
}

// gcHeadroom is how much a quiet window may allocate before the
// collector runs in it.
func gcHeadroom() int64 {
	if limit := connlimit.MemoryLimit(); limit > 0 {
		return min(gcHeadroomMax, limit/8)
	}
	return 1 << 30
}

// readRuntimeMetric reads one uint64 metric of the runtime (0 if it is
// not one).
func readRuntimeMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
