package checker

import (
	"fmt"
	"sort"
	"time"
)

// Watches checks every watcher stream of h against h's writes (see the
// package comment) and that each reset is explained by a compaction.
func Watches(h *History) []Anomaly {
	var compactions []int64
	for _, f := range h.Faults {
		if f.Kind == FaultCompact {
			compactions = append(compactions, f.At)
		}
	}
	byKind := map[[2]string]map[string][]Op{} // (kind, scope) -> entity -> writes, in call order
	var out []Anomaly
	for i := range h.Streams {
		st := &h.Streams[i]
		ks := [2]string{kindOf(*st), st.Scope}
		writes, ok := byKind[ks]
		if !ok {
			writes = map[string][]Op{}
			group := NotifyEntity(ks[0], ks[1])
			for _, op := range h.Ops {
				if op.Outcome != Failed && Matches(ks[0], ks[1], op) {
					e := op.Entity
					if group != "" {
						e = group
					}
					writes[e] = append(writes[e], op)
				}
			}
			for e, ws := range writes {
				sort.SliceStable(ws, func(i, j int) bool { return ws[i].Call < ws[j].Call })
				if ks[0] == KindMachines || ks[0] == KindContainers {
					writes[e] = lifecycleReported(ws)
				}
			}
			byKind[ks] = writes
		}
		out = append(out, checkStream(st, writes, compactions)...)
	}
	return out
}

// kindOf is a stream's watcher kind (KindModel for a history that named none).
func kindOf(st Stream) string {
	if st.Kind == "" {
		return KindModel
	}
	return st.Kind
}

// FaultCompact is the Fault kind of a compaction of etcd's history: what
// may reset a watcher.
const FaultCompact = "compact"

func checkStream(st *Stream, writes map[string][]Op, compactions []int64) []Anomaly {
	var out []Anomaly
	name := fmt.Sprintf("watcher %s (%s) on %s (stream started %s)", st.Watcher, kindOf(*st), st.Daemon, time.Duration(st.Start))
	if st.EndReason == EndReset {
		explained := false
		for _, at := range compactions {
			if at < st.End {
				explained = true
			}
		}
		if !explained {
			out = append(out, Anomaly{Kind: UnexpectedReset, Detail: fmt.Sprintf("%s reset at %s (%s) with no compaction before", name, time.Duration(st.End), st.EndErr)})
		}
	}

	// A daemon applies etcd's commits to its feed in revision order, a
	// moment after the writer had its answer (the feed follows etcd's
	// watch), and a watcher's Next returns what its feed applied since
	// the last one. So a delivery is not bound to the Next calls, only to
	// the order of the writes.
	//
	// Each delivery of an entity must be justified by a write of it not
	// used by an earlier delivery and called before the delivery arrived.
	// The earliest such write is taken: that leaves the most for later
	// deliveries (a delivery may coalesce several), and is the weakest
	// claim about order below.
	next := map[string]int{}                       // entity -> index of its first write not yet used
	threshold := make([]int64, len(st.Deliveries)) // writes returned before it must be delivered by then
	delivered := map[string][]int64{}              // entity -> Recv of its deliveries
	deliveredAt := map[string][]int{}              // entity -> index of its deliveries
	var run int64
	for j, d := range st.Deliveries {
		for _, e := range d.Entities {
			ws, tracked := writes[e]
			delivered[e] = append(delivered[e], d.Recv)
			deliveredAt[e] = append(deliveredAt[e], j)
			if !tracked {
				continue // an entity the workload does not write
			}
			k := next[e]
			if k == len(ws) || ws[k].Call >= d.Recv {
				out = append(out, Anomaly{Kind: UnjustifiedDeliv, Detail: fmt.Sprintf(
					"%s: delivery %d (received %s) names %s, and no write of it is left that could explain it",
					name, j, time.Duration(d.Recv), e)})
				continue
			}
			run = max(run, ws[k].Call)
			next[e] = k + 1
		}
		threshold[j] = run
	}

	// Every acknowledged write committed after the stream started was
	// committed before any write called after it returned: it must be
	// delivered no later than such a write is (lost if never, out of
	// order if later).
	for e, ws := range writes {
		for _, w := range ws {
			if w.Outcome != OK || w.Call <= st.Started {
				continue
			}
			j := sort.Search(len(threshold), func(j int) bool { return threshold[j] > w.Return })
			if j == len(threshold) {
				continue // nothing later was delivered: the stream may have ended before it
			}
			recvs := delivered[e]
			k := sort.Search(len(recvs), func(k int) bool { return recvs[k] > w.Call })
			if k < len(recvs) && deliveredAt[e][k] <= j {
				continue
			}
			kind := LostDelivery
			if k < len(recvs) {
				kind = Reordered
			}
			out = append(out, Anomaly{Kind: kind, Detail: fmt.Sprintf(
				"%s: write %q of %s (%s) [%s, %s] not delivered by delivery %d (received %s, naming %v), which delivered a later write",
				name, w.Value, e, w.Register, time.Duration(w.Call), time.Duration(w.Return), j,
				time.Duration(st.Deliveries[j].Recv), st.Deliveries[j].Entities)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Detail < out[j].Detail })
	return out
}
