package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func gcSettings() (percent uint64, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestToolWindowQuiet: a quiet window turns this process's collector off
// inside it under a memory limit, counts the collections that ran in it
// anyway, and puts both settings back as it closes.
func TestToolWindowQuiet(t *testing.T) {
	percent0, limit0 := gcSettings()
	w := &toolWindow{quiet: true}
	w.mark(true)
	percent, limit := gcSettings()
	if percent != math.MaxUint64 { // off reads as -1
		t.Errorf("in the window the GC percent reads %d, want off", percent)
	}
	if limit >= math.MaxInt64 || limit < uint64(readRuntimeMetric("/memory/classes/total:bytes")) {
		t.Errorf("in the window the memory limit is %d: want what the process holds plus the headroom", limit)
	}
	runtime.GC() // one that runs in the window anyway
	w.mark(false)
	if p, l := gcSettings(); p != percent0 || l != limit0 {
		t.Errorf("after the window GC percent %d, limit %d; want %d, %d as before", p, l, percent0, limit0)
	}
	v := newValues()
	w.set(v, "")
	if got := valueOf(t, v, "load generator GC cycles"); got != 1 {
		t.Errorf("load generator GC cycles = %v, want 1", got)
	}

	// Not quiet (--loadgen-gc go, or a daemon in this process): counted,
	// left alone.
	w = &toolWindow{}
	old := debug.SetGCPercent(137)
	defer debug.SetGCPercent(old)
	w.mark(true)
	if p, _ := gcSettings(); p != 137 {
		t.Errorf("a window that is not quiet set the GC percent to %d", p)
	}
	w.mark(false)
}

func TestParseCPUTicks(t *testing.T) {
	const stat = "cpu  100 5 20 800 10 1 4 60 7 0\ncpu0 50 2 10 400 5 0 2 30 3 0\n"
	t0 := parseCPUTicks(stat)
	if !t0.ok || t0.total != 1000 || t0.steal != 60 {
		t.Fatalf("parse: %+v, want total 1000 (guest not added), steal 60", t0)
	}
	t1 := parseCPUTicks("cpu  150 5 30 890 10 1 4 110 7 0\n")
	if got := t1.stolenSince(t0); got != 25 {
		t.Errorf("stolen = %v%%, want 25 (50 of 200 ticks)", got)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x 9"} {
		if c := parseCPUTicks(bad); c.ok {
			t.Errorf("parse %q: %+v, want not ok", bad, c)
		}
	}
	if s := t0.stolenSince(t0); !math.IsNaN(s) {
		t.Errorf("no time passed: %v, want NaN", s)
	}
	if s := t1.stolenSince(cpuTicks{}); !math.IsNaN(s) {
		t.Errorf("a failed reading: %v, want NaN", s)
	}
}

func valueOf(t *testing.T, v *values, name string) float64 {
	t.Helper()
	x, ok := v.m[name]
	if !ok {
		t.Fatalf("no figure %q in %v", name, v.order)
	}
	return x
}
