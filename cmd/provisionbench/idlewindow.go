package main

import (
	"context"
	"errors"
	"time"
)

// idleWindow is watch's window without changes (--idle-window): every
// agent connected with its watchers, no write, for as long as the changes'
// window is driven (--duration), just before it. What the processes spend
// in it is what a connected fleet costs by itself: the agents' pings
// (Pinger.Ping every minute each, and the daemons' websocket pings), the
// daemons' keeping of their connections and replicas, the load
// generators' timers. At 100,000 agents that is some 1,700 pings a
// second, 17 for each change at 100 changes a second, and the per-change
// rows hold them; the rows "less idle" take the idle window's amounts,
// scaled to the changes' window's length, out. The two windows are about
// as long so that what each costs once (the /metrics reads at its edges)
// cancels instead of being scaled.
type idleWindow struct {
	cpu   *cpuWindow
	dw    *daemonsWindow
	wall  time.Duration
	pings float64 // Pinger.Ping calls the daemons answered in it; -1: not read
}

// measureIdle runs the idle window: the same processes as the changes'
// window (cpu's), the load generators' collectors kept out of it as in
// that window.
func measureIdle(ctx context.Context, e *env, lg *loadgens, d time.Duration, newCPU func() *cpuWindow) (*idleWindow, error) {
	w := &idleWindow{cpu: newCPU(), dw: newDaemonsWindow(e.targets)}
	e.o.progress.set("watch: idle window (agents connected, no change) for " + d.String())
	if _, err := lg.all(lgRequest{Op: "window-open"}); err != nil {
		return nil, err
	}
	p0 := pingCalls(e.targets)
	w.dw.open()
	w.cpu.mark(true)
	start := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w.cpu.mark(false)
	w.wall = time.Since(start)
	w.dw.close()
	p1 := pingCalls(e.targets)
	if _, err := lg.all(lgRequest{Op: "window-close"}); err != nil {
		return nil, err
	}
	w.pings = -1
	if p0 >= 0 && p1 >= 0 {
		w.pings = p1 - p0
	}
	return w, nil
}

// pingCalls is the Pinger.Ping calls the daemons have answered (their
// request histogram's count; a daemon without the series has answered
// none), -1 if any could not be read.
func pingCalls(ts []*target) float64 {
	sum := 0.0
	for _, t := range ts {
		h, err := t.scrapeHist("provisiond_request_duration_seconds", `facade="Pinger"`, `method="Ping"`)
		switch {
		case errors.Is(err, errNoSeries):
		case err != nil || len(h.counts) == 0:
			return -1
		default:
			sum += h.counts[len(h.counts)-1]
		}
	}
	return sum
}

// set adds the idle window's rates and, for the changes' window (cpu and
// dw, which lasted wall), each per-change figure less the idle rate over
// that window's length: the change's own cost.
func (w *idleWindow) set(v *values, cpu *cpuWindow, dw *daemonsWindow, wall time.Duration, changes float64) {
	if w == nil || w.wall <= 0 || changes <= 0 {
		return
	}
	secs := w.wall.Seconds()
	scale := wall.Seconds() / secs // the idle window's amounts over the changes' window
	if w.pings >= 0 {
		v.set("idle: agent pings (Pinger.Ping) per second", "", w.pings/secs)
		v.set("idle: agent pings per change", "", w.pings*scale/changes)
	}
	for i := range w.cpu.pids {
		if !w.cpu.ok[i] || !cpu.ok[i] {
			continue
		}
		idle := float64(w.cpu.used[i].Microseconds()) / 1e3
		v.set("idle: "+w.cpu.names[i]+" CPU per second", "ms", idle/secs)
		v.set(w.cpu.names[i]+" CPU per change, less idle", "ms",
			(float64(cpu.used[i].Microseconds())/1e3-idle*scale)/changes)
	}
	for _, s := range []struct{ series, name, unit string }{
		{allocBytes, "bytes allocated", "B"},
		{allocObjects, "objects allocated", ""},
	} {
		idle, ok1 := w.dw.total(s.series)
		used, ok2 := dw.total(s.series)
		if !ok1 || !ok2 {
			continue
		}
		v.set("idle: daemon "+s.name+" per second", s.unit, idle/secs)
		v.set("daemon "+s.name+" per change, less idle", s.unit, (used-idle*scale)/changes)
	}
}
