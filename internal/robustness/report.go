package robustness

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/provisiond/provisiond/internal/robustness/checker"
)

// Report describes a run: its figures, per fault kind how many were
// injected and the recovery after them (p50 and max), per watcher kind
// its streams and deliveries, every anomaly, and a last line "N histories, M faults,
// K anomalies" (histories: the registers checked for linearizability
// and the watcher streams checked for delivery).
func Report(res Result) string {
	var b strings.Builder
	s := res.Summary
	fmt.Fprintf(&b, "seed %d, %s: %s\n", res.History.Seed, res.Elapsed.Round(time.Second), s)
	rec := map[string][]time.Duration{}
	for _, f := range res.History.Faults {
		if f.Recovery > 0 {
			rec[f.Kind] = append(rec[f.Kind], time.Duration(f.Recovery))
		}
	}
	kinds := make([]string, 0, len(s.Faults))
	for k := range s.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ds := rec[k]
		fmt.Fprintf(&b, "fault %s: %d injected", k, s.Faults[k])
		if len(ds) > 0 {
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			fmt.Fprintf(&b, ", recovery p50 %s, max %s (%d recovered)",
				ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
		}
		b.WriteString("\n")
	}
	for _, k := range checker.WatchKinds {
		if n, ok := s.Kinds[k]; ok {
			fmt.Fprintf(&b, "watcher %s: %d streams, %d deliveries\n", k, n[0], n[1])
		}
	}
	for _, a := range res.Anomalies {
		fmt.Fprintf(&b, "ANOMALY %s\n", a)
	}
	faults := 0
	for _, n := range s.Faults {
		faults += n
	}
	fmt.Fprintf(&b, "%d histories, %d faults, %d anomalies", s.Registers+s.Streams, faults, len(res.Anomalies))
	return b.String()
}

// WriteHistory saves a run's history as JSON in $ROBUSTNESS_HISTORY_DIR
// (default: the system's temporary directory) and returns its path.
func WriteHistory(h *checker.History) (string, error) { return historyFile(h) }
