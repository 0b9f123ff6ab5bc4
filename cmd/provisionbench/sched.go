package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/provisiond/provisiond/internal/connlimit"
)

// How long goroutines waited to run once runnable, in the daemons and in
// the load generators, over a run: the runtime's /sched/latencies:seconds
// (the daemons serve it as provisiond_sched_latency_seconds; a load
// generator reads its own from the run's arm on). An agent's client
// closes its connection when a ping goes unanswered for 30 s, and a ping
// waits for the daemon's goroutines and for the agent's own: these say
// which of the two was too busy. The histograms are kept as cumulative
// counts by bound ("le", as Prometheus writes them), so that they add up
// across processes and restarts as connEnds do.

const schedMetric = "provisiond_sched_latency_seconds"

// schedSlow is the wait reported as "slow": a thirtieth of the 30 s a
// ping may take.
const schedSlow = 1.0

// readOwnSched is this process's waits to run since it started.
func readOwnSched() connEnds {
	cum, count, _ := connlimit.SchedLatencies(connlimit.SchedLatencyBounds)
	m := connEnds{"+Inf": float64(count)}
	for i, b := range connlimit.SchedLatencyBounds {
		m[strconv.FormatFloat(b, 'g', -1, 64)] = float64(cum[i])
	}
	return m
}

// schedHistogram reads cumulative counts by bound as a histogram.
func schedHistogram(m connEnds) histogram {
	var h histogram
	byBound := map[float64]float64{}
	for le, n := range m {
		b, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		byBound[b] += n
		h.bounds = append(h.bounds, b)
	}
	slices.Sort(h.bounds)
	h.bounds = slices.Compact(h.bounds)
	for _, b := range h.bounds {
		h.counts = append(h.counts, byBound[b])
	}
	return h
}

// schedFigures are a histogram's figures: p99 and p99.9 at most (the
// bucket's upper bound; +Inf: beyond the last bound), the waits in all
// and those of schedSlow or more.
type schedFigures struct {
	p99, p999   float64
	total, slow float64
	ok          bool
}

func figuresOf(m connEnds) schedFigures {
	h := schedHistogram(m)
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return schedFigures{}
	}
	f := schedFigures{p99: h.quantileBound(99), p999: h.quantileBound(99.9), total: h.counts[len(h.counts)-1], ok: true}
	f.slow = f.total
	for i, b := range h.bounds { // waits counted at or under the schedSlow bound are fast
		if b <= schedSlow {
			f.slow = f.total - h.counts[i]
		}
	}
	return f
}

func (f schedFigures) String() string {
	if !f.ok {
		return "not known"
	}
	return fmt.Sprintf("p99 %s, p99.9 %s, %.0f of %.0f waits %g s or more", atMost(f.p99), atMost(f.p999), f.slow, f.total, schedSlow)
}

func atMost(b float64) string {
	if math.IsInf(b, 1) {
		return fmt.Sprintf("over %g s", connlimit.SchedLatencyBounds[len(connlimit.SchedLatencyBounds)-1])
	}
	return fmt.Sprintf("at most %g s", b)
}

// sumSched adds up histograms (nil ones are left out).
func sumSched(ms []connEnds) connEnds {
	sum := connEnds{}
	for _, m := range ms {
		sum = sum.plus(m, nil)
	}
	return sum
}

// describeSched is the daemons' waits to run, all together, for a
// failure's message.
func describeSched(ms []connEnds) string { return figuresOf(sumSched(ms)).String() }

// setSched sets the rows of one histogram under name.
func setSched(v *values, name string, m connEnds) {
	f := figuresOf(m)
	if !f.ok {
		return
	}
	set := func(row string, b float64) {
		if !math.IsInf(b, 0) { // JSON has no infinity: left out, the slow count says it
			v.set(row, "s", b)
		}
	}
	set(name+", p99 at most", f.p99)
	set(name+", p99.9 at most", f.p999)
	v.setCount(fmt.Sprintf("%s, waits of %g s or more", name, schedSlow), f.slow)
}

// setDaemonsSched sets the daemons' rows: all together, and the worst
// daemon's p99 when there are several.
func setDaemonsSched(v *values, per []connEnds) {
	setSched(v, "daemons' goroutines' waits to run", sumSched(per))
	if len(per) < 2 {
		return
	}
	worst := math.NaN()
	for _, m := range per {
		if f := figuresOf(m); f.ok && (math.IsNaN(worst) || f.p99 > worst) {
			worst = f.p99
		}
	}
	if !math.IsNaN(worst) && !math.IsInf(worst, 0) {
		v.set("daemons' goroutines' waits to run, the worst daemon's p99 at most", "s", worst)
	}
}
