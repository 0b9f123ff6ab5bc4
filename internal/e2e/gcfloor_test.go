package e2e

import (
	"net/http"
	"testing"
)

// TestBuiltDaemonHeapGoalIsTheFloor: a provisiond serve just started, on
// its defaults, has the heap floor (128 MiB) as its heap goal, as its own
// /metrics says (go_memstats_next_gc_bytes). Before session 11's fix of
// internal/gcfloor, the goal was 41 GiB when the floor started before the
// runtime's first collection (the daemon then never collected at all)
// and several hundred MiB when it started after it.
func TestBuiltDaemonHeapGoalIsTheFloor(t *testing.T) {
	const floor = 128 << 20 // gcfloor.Default, serve's --gc-heap-floor
	d := startBoltDaemon(t, "floor", "--metrics-addr", "127.0.0.1:0")
	var addr string
	waitFor(t, "the metrics listener's address in the log", func() bool {
		addr = d.loggedAddr("serving metrics")
		return addr != ""
	})
	hc := &http.Client{Timeout: callTimeout}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	goal := metricIn(t, "/metrics", resp, "go_memstats_next_gc_bytes")
	if goal > floor*1.02 || goal < floor/2 {
		t.Errorf("the daemon's heap goal is %.0f MiB, want the floor, %d MiB", goal/(1<<20), floor>>20)
	}
}
