package robustness

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/provisiond/provisiond/internal/robustness/checker"
)

// Report describes a run: its figures, recovery per fault kind (p50 and
// max), every anomaly, and a last line "N histories, M faults,
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
	kinds := make([]string, 0, len(rec))
	for k := range rec {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		ds := rec[k]
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		fmt.Fprintf(&b, "recovery after %s: p50 %s, max %s (%d)\n", k,
			ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), len(ds))
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
