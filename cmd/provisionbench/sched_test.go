package main

import (
	"strings"
	"testing"
)

// The daemons' waits to run as internal/daemon serves them, read by
// bound, over a run: the daemon's reading at the end less its reading
// before; two daemons add up; p99 and p99.9 are the upper bounds of
// their buckets; waits over the last bound show as "over 30 s".
func TestSchedRows(t *testing.T) {
	const metrics = `# TYPE provisiond_sched_latency_seconds histogram
provisiond_sched_latency_seconds_bucket{le="0.0001"} 9000
provisiond_sched_latency_seconds_bucket{le="0.001"} 9900
provisiond_sched_latency_seconds_bucket{le="0.01"} 9990
provisiond_sched_latency_seconds_bucket{le="0.1"} 9990
provisiond_sched_latency_seconds_bucket{le="0.25"} 9990
provisiond_sched_latency_seconds_bucket{le="0.5"} 9990
provisiond_sched_latency_seconds_bucket{le="1"} 9990
provisiond_sched_latency_seconds_bucket{le="2"} 9995
provisiond_sched_latency_seconds_bucket{le="5"} 9995
provisiond_sched_latency_seconds_bucket{le="10"} 9995
provisiond_sched_latency_seconds_bucket{le="30"} 10000
provisiond_sched_latency_seconds_bucket{le="+Inf"} 10000
provisiond_sched_latency_seconds_sum 12
provisiond_sched_latency_seconds_count 10000
`
	end, err := scrapeLabeled(strings.NewReader(metrics), schedMetric+"_bucket", "le")
	if err != nil {
		t.Fatal(err)
	}
	before := connEnds{"0.0001": 4000, "0.001": 4000, "0.01": 4000, "0.1": 4000, "0.25": 4000, "0.5": 4000, "1": 4000,
		"2": 4000, "5": 4000, "10": 4000, "30": 4000, "+Inf": 4000}
	run := connEnds{}.plus(end, before) // 6,000 waits: 5,000 under 0.1 ms, 900 under 1 ms, 90 under 10 ms, 5 in (1, 2], 5 in (10, 30]
	f := figuresOf(run)
	if !f.ok || f.p99 != 0.01 || f.p999 != 2 || f.total != 6000 || f.slow != 10 {
		t.Fatalf("figures %+v; want p99 0.01, p99.9 2, 6000 waits, 10 slow", f)
	}
	if got, want := f.String(), "p99 at most 0.01 s, p99.9 at most 2 s, 10 of 6000 waits 1 s or more"; got != want {
		t.Errorf("%q; want %q", got, want)
	}
	long := connEnds{"1": 0, "30": 0, "+Inf": 10}
	if got := figuresOf(long).String(); got != "p99 over 30 s, p99.9 over 30 s, 10 of 10 waits 1 s or more" {
		t.Errorf("waits over the last bound: %q", got)
	}
	// Waits counted at the 1 s bound (up to 1 s) are not slow; those
	// beyond it are.
	if f := figuresOf(connEnds{"0.5": 90, "1": 97, "2": 99, "+Inf": 100}); f.slow != 3 {
		t.Errorf("waits beyond the 1 s bound: %v; want 3", f.slow)
	}
	if got := figuresOf(nil).String(); got != "not known" {
		t.Errorf("no reading: %q", got)
	}

	v := newValues()
	setDaemonsSched(v, []connEnds{run, long, nil})
	for name, want := range map[string]float64{
		"daemons' goroutines' waits to run, p99 at most":                    0.01,
		"daemons' goroutines' waits to run, waits of 1 s or more":           20,
		"daemons' goroutines' waits to run, the worst daemon's p99 at most": 0, // over 30 s: left out
	} {
		got, ok := v.m[name]
		if want == 0 {
			if ok {
				t.Errorf("%s = %v; want no row (infinite)", name, got)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("%s = %v (%v); want %v", name, got, ok, want)
		}
	}
	if s := describeSched([]connEnds{run, long}); !strings.Contains(s, "20 of 6010 waits 1 s or more") {
		t.Errorf("describeSched = %q", s)
	}
}
