package main

// daemonGC reads the daemon's garbage collector over one measuring window
// from its /metrics (the Go collector's runtime/metrics series): the
// collections that ran in the window, the share of the daemon's Go CPU
// time the collector took in it, and its live heap and heap goal as the
// window closed. These, with the latencies, are what GOGC and GOMEMLIMIT
// trade (docs/operator-guide.md, "Memory and the garbage collector").
type daemonGC struct {
	t          *target
	start, end map[string]float64
}

// The series daemonGC reads. The /cpu/classes ones are the runtime's own
// estimates, brought up to date at each collection: comparable with each
// other, not with /proc's CPU time, so the share is GC over the Go CPU
// time that was not idle, over the cycles that ended in the window (none
// ended: no share).
const (
	gcCycles = "go_gc_duration_seconds_count"
	gcCPU    = "go_cpu_classes_gc_total_cpu_seconds_total"
	totalCPU = "go_cpu_classes_total_cpu_seconds_total"
	idleCPU  = "go_cpu_classes_idle_cpu_seconds_total"
	heapLive = "go_gc_heap_live_bytes"
	heapGoal = "go_gc_heap_goal_bytes"
)

// daemonGCNote explains daemonGC's rows in a workload's notes.
const daemonGCNote = "daemon GC: the daemon's collections in the window; the collector's share of the daemon's Go CPU time over the cycles that ended in it (runtime/metrics /cpu/classes, which the runtime brings up to date at each collection: GC over all but idle); its live heap after its last collection and its heap goal as the window closed"

var daemonGCSeries = []string{gcCycles, gcCPU, totalCPU, idleCPU, heapLive, heapGoal}

func newDaemonGC(t *target) *daemonGC { return &daemonGC{t: t} }

func (g *daemonGC) open() {
	if g != nil {
		g.start, _ = g.t.scrapeSeries(daemonGCSeries)
		g.end = nil
	}
}

func (g *daemonGC) close() {
	if g != nil && g.start != nil {
		g.end, _ = g.t.scrapeSeries(daemonGCSeries)
	}
}

// set adds the window's figures; agents > 0 adds the live heap per agent.
// A series the daemon does not serve leaves its row out.
func (g *daemonGC) set(v *values, prefix string, agents int) {
	if g == nil || g.start == nil || g.end == nil {
		return
	}
	delta := func(name string) (float64, bool) {
		a, oka := g.start[name]
		b, okb := g.end[name]
		return b - a, oka && okb
	}
	if d, ok := delta(gcCycles); ok {
		v.set(prefix+"daemon GC cycles", "", d)
	}
	gc, ok1 := delta(gcCPU)
	total, ok2 := delta(totalCPU)
	idle, ok3 := delta(idleCPU)
	if ok1 && ok2 && ok3 && total-idle > 0 {
		v.set(prefix+"daemon GC CPU share", "%", 100*gc/(total-idle))
	}
	if live, ok := g.end[heapLive]; ok {
		v.set(prefix+"daemon live heap", "MiB", live/(1<<20))
		if agents > 0 {
			v.set(prefix+"daemon live heap KiB/agent", "KiB", live/1024/float64(agents))
		}
	}
	if goal, ok := g.end[heapGoal]; ok {
		v.set(prefix+"daemon heap goal", "MiB", goal/(1<<20))
	}
}
