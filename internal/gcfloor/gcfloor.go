// Package gcfloor keeps the Go garbage collector from running while the
// heap is small.
//
// With GOGC=100 the collector runs each time the heap has grown by as much
// as survived the last collection. A daemon whose live heap is 20 MB and
// whose writes allocate 150 MB a second collects seven times a second, and
// on a two-core box that was 15-18% of the daemon's CPU at 64 writers
// (docs/performance.md). A floor sets the heap goal to at least Floor
// bytes: after each collection the GC percent is set so that the next goal
// is max(Floor, live × (1 + base/100)), where base is the GC percent the
// process started with. A heap above the floor is collected as base says;
// one below it grows to the floor first, so a small daemon may hold up to
// Floor bytes of heap, garbage included. GOMEMLIMIT, when set, still
// bounds it: the runtime collects earlier as the limit nears.
//
// An operator's GOGC is left alone: the caller does not start a floor
// when GOGC is set (cmd/provisiond), and a base of off (-1) is never
// tuned.
//
// # Concurrency contract
//
// Start and Stop may be called from any goroutine. The tuning runs in a
// runtime cleanup (runtime.AddCleanup) of an object dropped at once, so
// once per collection, on the runtime's cleanup goroutine; it has no
// goroutine of its own and takes a mutex, as cleanups may run at once.
// After Stop, no cleanup changes the GC percent again and the next one
// arms no other.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Default is provisiond serve's floor (--gc-heap-floor): 128 MiB.
const Default = 128 << 20

// FromEnvironment starts a floor of floor bytes, unless floor is 0 or the
// process's environment sets GOGC (which the runtime has read): the
// operator's choice then stands alone. It returns nil when it starts
// none, with the GOGC it found if that is why.
func FromEnvironment(floor uint64) (f *Floor, gogc string) {
	if floor == 0 {
		return nil, ""
	}
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		return nil, v
	}
	return Start(floor), ""
}

// maxPercent bounds the GC percent a floor sets: 1,048,576%, which is
// already a goal of 40 GiB by heapMinimum alone (a larger floor is held
// there).
const maxPercent = 1 << 20

// heapMinimum is the runtime's smallest heap goal at GC percent 100
// (defaultHeapMinimum in runtime/mgcpacer.go). The runtime scales it with
// the GC percent: whatever the live heap, the goal is at least
// heapMinimum × percent / 100. A floor that ignored it set 12,700% over a
// live heap of 1 MiB (a goal of 508 MiB for a floor of 128 MiB), and
// 1,048,576% before the first collection, when no live heap is known: a
// goal of 41 GiB, so a daemon that started its floor before the runtime's
// first collection never collected at all (issue 16, found in session 11).
const heapMinimum = 4 << 20

// Floor is a running floor under the heap goal.
type Floor struct {
	floor uint64
	base  int

	mu      sync.Mutex
	stopped bool
	cur     int // the GC percent last set
	samples []metrics.Sample
}

// Start keeps the heap goal at least floor bytes until Stop. It returns
// nil (and changes nothing) if floor is 0 or the collector is off.
func Start(floor uint64) *Floor {
	if floor == 0 {
		return nil
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[0].Value.Uint64() > maxPercent {
		return nil // off reads as -1
	}
	base := int(s[0].Value.Uint64())
	f := &Floor{
		floor:   floor,
		base:    base,
		cur:     base,
		samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}},
	}
	f.mu.Lock()
	f.tuneLocked()
	f.mu.Unlock()
	f.arm()
	return f
}

// Stop ends the floor and restores the GC percent it started with.
func (f *Floor) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	if f.cur != f.base {
		debug.SetGCPercent(f.base)
		f.cur = f.base
	}
}

// Percent is the GC percent the floor set last (its base before the
// first collection or after Stop).
func (f *Floor) Percent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// sentinel is the object whose collection runs the next tuning: large
// enough not to share a tiny block with other allocations, which would
// delay its cleanup behind theirs.
type sentinel struct{ _ [32]byte }

// arm attaches the next tuning to a new object nothing keeps: the next
// collection finds it unreachable and runs the cleanup.
func (f *Floor) arm() {
	runtime.AddCleanup(new(sentinel), (*Floor).tune, f)
}

// tune runs after each collection: it sets the GC percent for the live
// heap the collection found and arms the next tuning.
func (f *Floor) tune() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.tuneLocked()
	f.arm()
}

func (f *Floor) tuneLocked() {
	metrics.Read(f.samples)
	var v [3]uint64
	for i, s := range f.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	want := Percent(f.floor, v[0], v[1]+v[2], f.base)
	// Small moves are not worth the runtime's lock: within 1/16 of the
	// current setting, it stays.
	if d := want - f.cur; want == f.base && f.cur != f.base || d > f.cur/16 || -d > f.cur/16 {
		debug.SetGCPercent(want)
		f.cur = want
	}
}

// Percent is the GC percent that makes the heap goal after a collection
// max(floor, the goal at base), for a collection that left live bytes of
// heap and roots bytes of stacks and globals to scan (zero before the
// first collection: nothing is known yet). The runtime's goal at percent
// p is the larger of live + (live + roots) × p / 100 and heapMinimum × p /
// 100, so p is the smaller of the two percents that each bring one of
// them to the floor; before the first collection only the second is
// known, and it alone keeps the first goal at the floor.
func Percent(floor, live, roots uint64, base int) int {
	scan := live + roots
	if live >= floor || live+scan/100*uint64(base)+scan%100*uint64(base)/100 >= floor {
		return base // the goal at base reaches the floor
	}
	p := scaled(floor, heapMinimum)
	if scan > 0 {
		p = min(p, scaled(floor-live, scan))
	}
	return max(int(min(p, maxPercent)), base)
}

// scaled is a × 100 / b, rounded down, without overflow for any a.
func scaled(a, b uint64) uint64 {
	q := a / b
	if q >= maxPercent {
		return maxPercent
	}
	return q*100 + (a%b)*100/b
}
