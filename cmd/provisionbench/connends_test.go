package main

import (
	"reflect"
	"strings"
	"testing"
)

// A daemon's /metrics as internal/daemon serves it: every reason at 0
// until a connection ends with it.
const endsMetrics = `# HELP provisiond_connections_ended_total API connections ended, by reason.
# TYPE provisiond_connections_ended_total counter
provisiond_connections_ended_total{reason="client_closed"} 3
provisiond_connections_ended_total{reason="client_gone"} 0
provisiond_connections_ended_total{reason="read_deadline"} 4
provisiond_connections_ended_total{reason="shutdown"} 0
provisiond_connections_ended_totalx{reason="closed"} 9
provisiond_connections_total 17
`

func TestScrapeLabeled(t *testing.T) {
	got, err := scrapeLabeled(strings.NewReader(endsMetrics), connsEndedMetric, "reason")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"client_closed": 3, "client_gone": 0, "read_deadline": 4, "shutdown": 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scrapeLabeled = %v, want %v", got, want)
	}
}

// Over a run: a daemon read before the agents and at the end, and one
// restarted in the run (read before its stop, its new process from 0).
func TestConnEndsRows(t *testing.T) {
	steady := connEnds{}.plus(connEnds{"client_closed": 5, "read_deadline": 4}, connEnds{"client_closed": 2, "read_deadline": 0})
	restarted := connEnds{}.plus(connEnds{"client_gone": 1, "client_closed": 1}, connEnds{"client_closed": 1}) // before its stop
	restarted = restarted.plus(connEnds{"client_closed": 2}, nil)                                              // its new process
	r := endsReading{per: []connEnds{steady, restarted}, sum: connEnds{}.plus(steady, nil).plus(restarted, nil), ok: true}
	v := newValues()
	r.set(v)
	want := []struct {
		name string
		x    float64
	}{
		{"connections ended by the daemons", 10},
		{"  of which client_closed", 5},
		{"    client_closed on daemon 1", 3},
		{"    client_closed on daemon 2", 2},
		{"  of which client_gone", 1},
		{"    client_gone on daemon 2", 1},
		{"  of which read_deadline", 4},
		{"    read_deadline on daemon 1", 4},
	}
	if len(v.order) != len(want) {
		t.Fatalf("rows %q, want %d", v.order, len(want))
	}
	for i, w := range want {
		if v.order[i] != w.name || v.m[w.name] != w.x {
			t.Errorf("row %d: %q = %v, want %q = %v", i, v.order[i], v.m[v.order[i]], w.name, w.x)
		}
	}
}

// A reason counted in one run of several is 0 in the others, and its row
// stays beside the others.
func TestCollectCounts(t *testing.T) {
	a, b := newValues(), newValues()
	for _, v := range []*values{a, b} {
		v.set("all back", "s", 1)
		v.setCount("connections ended by the daemons", 0)
	}
	b.m["connections ended by the daemons"] = 2
	b.setCount("  of which read_deadline", 2)
	b.set("other errors", "", 0)
	a.set("other errors", "", 0)
	res := collect(10, []*values{a, b, a}, nil, nil, nil)
	var names []string
	for _, m := range res.Metrics {
		names = append(names, m.Name)
	}
	if want := []string{"all back", "connections ended by the daemons", "  of which read_deadline", "other errors"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("rows %q, want %q", names, want)
	}
	if m := res.metric("  of which read_deadline"); !reflect.DeepEqual(m.Runs, []float64{0, 2, 0}) || m.Median != 0 {
		t.Errorf("read_deadline: runs %v median %v, want [0 2 0] and 0", m.Runs, m.Median)
	}
}
