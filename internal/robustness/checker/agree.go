package checker

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Agreement checks that the daemons agree once the run has settled: the
// last final read (Op.Final) of each register through each daemon found
// the same value (or found it absent) through every daemon. The final
// reads are made after every fault was healed, every daemon resumed and a
// write acknowledged through each (which it had applied every earlier
// revision by), so no daemon may be behind; and so a write in doubt is
// seen by all of them or by none (an in-doubt write a stopped daemon sent
// late landed before that daemon's final write, or it is a linearization
// point the porcupine check accepts like any other).
func Agreement(ops []Op) []Anomaly {
	last := map[string]map[string]Op{} // register -> daemon -> its last final read
	for _, op := range ops {
		if !op.Final || op.Write || op.Outcome != OK {
			continue
		}
		if last[op.Register] == nil {
			last[op.Register] = map[string]Op{}
		}
		if prev, ok := last[op.Register][op.Daemon]; !ok || op.Call > prev.Call {
			last[op.Register][op.Daemon] = op
		}
	}
	var out []Anomaly
	for _, r := range slices.Sorted(maps.Keys(last)) {
		seen := map[string][]string{} // value -> daemons
		for d, op := range last[r] {
			v := op.Value
			if op.Absent {
				v = "(absent)"
			}
			seen[v] = append(seen[v], d)
		}
		if len(seen) < 2 {
			continue
		}
		var parts []string
		for v, ds := range seen {
			sort.Strings(ds)
			parts = append(parts, fmt.Sprintf("%q through %s", v, strings.Join(ds, ",")))
		}
		sort.Strings(parts)
		out = append(out, Anomaly{Kind: Disagreement, Detail: fmt.Sprintf("register %s read last as %s", r, strings.Join(parts, "; "))})
	}
	return out
}
