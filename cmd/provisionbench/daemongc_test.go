package main

import (
	"strings"
	"testing"
)

// TestDaemonGCWindow: the window's figures from two readings of /metrics
// as the Go collector serves them (names as client_golang maps the
// runtime/metrics series).
func TestDaemonGCWindow(t *testing.T) {
	read := func(text string) map[string]float64 {
		m, err := scrapeSeries(strings.NewReader(text), daemonGCSeries)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	g := &daemonGC{
		start: read("go_gc_duration_seconds_count 10\ngo_cpu_classes_gc_total_cpu_seconds_total 1\n" +
			"go_cpu_classes_total_cpu_seconds_total 20\ngo_cpu_classes_idle_cpu_seconds_total 10\n" +
			"go_gc_heap_live_bytes 1048576\ngo_gc_heap_goal_bytes 2097152\n"),
		end: read("go_gc_duration_seconds_count 13\ngo_cpu_classes_gc_total_cpu_seconds_total 2\n" +
			"go_cpu_classes_total_cpu_seconds_total 40\ngo_cpu_classes_idle_cpu_seconds_total 20\n" +
			"go_gc_heap_live_bytes 4194304\ngo_gc_heap_goal_bytes 8388608\n"),
	}
	v := newValues()
	g.set(v, "", 1024)
	for name, want := range map[string]float64{
		"daemon GC cycles":           3,
		"daemon GC CPU share":        10, // 1 s of GC over 10 s not idle
		"daemon live heap":           4,
		"daemon live heap KiB/agent": 4,
		"daemon heap goal":           8,
	} {
		if got := valueOf(t, v, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}

	// A daemon that serves none of them (or a window not measured): no rows.
	v = newValues()
	(&daemonGC{start: read(""), end: read("")}).set(v, "", 1)
	(*daemonGC)(nil).set(v, "", 1)
	if len(v.order) != 0 {
		t.Errorf("rows without the series: %v", v.order)
	}
}
