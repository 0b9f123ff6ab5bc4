package connlimit

import (
	"math"
	"runtime/metrics"
	"sync"
	"time"
)

// Shedding new connections while the process is too busy to answer the
// ones it holds (docs/performance.md, "Overload").
//
// An agent pings its controller every minute and closes its connection
// when a ping goes unanswered for 30 s, as Juju's API client does. When
// thousands of agents reconnect at once (a failover, a rolling restart
// on a small box), their handshakes, logins and watchers can keep the
// daemon's goroutines waiting to run for seconds each: the pings of the
// agents already served wait as long, pass 30 s, and those agents close
// and reconnect too, which is more of the same work. The overload gate
// breaks that loop:
//
//   - Its signal is the runtime's own: /sched/latencies:seconds, how long
//     goroutines waited to run once runnable. Whatever the work, a ping's
//     reply waits as long as that, a few times over (the reader's wake,
//     the writer's).
//   - It reads it at most once a period (sheddingPeriod), lazily, from the
//     accept loop: no goroutine of its own. A reading takes the waits
//     that ended since the one before, and the gate sheds when the 99th
//     percentile of them is at least the limit (the lower bound of its
//     bucket: never on a figure merely rounded up), until a reading below
//     it.
//   - While it sheds, the Listener refuses every new connection at
//     accept, with a reset, before any TLS work (RefusedOverload), but
//     the local operator's while it holds fewer than its share of the cap
//     (listener.go); the client retries with its backoff. What is already
//     accepted goes on: handshakes waiting for a slot, logins.
//   - A limit of 0 turns shedding off, the daemon's default: the gate is
//     an operator's choice until a measurement shows it helps (in a
//     storm of 100,000 agents it engaged, and that run did not finish
//     where one without it had; docs/performance.md, "Overload").

// sheddingPeriod is how often the gate reads the scheduler's latencies.
const sheddingPeriod = 250 * time.Millisecond

// schedLatencies is the runtime's histogram of goroutines' waits to run.
const schedLatencies = "/sched/latencies:seconds"

// Overload is the gate's state. Safe for concurrent use.
type Overload struct {
	limit  time.Duration
	period time.Duration
	now    func() time.Time
	read   func(*metrics.Float64Histogram) // reads the histogram (tests: a fake)

	mu       sync.Mutex // guards the fields below
	last     time.Time  // the last reading
	prev     []uint64   // its counts
	shedding bool
}

// NewOverload returns a gate that sheds while the scheduler's p99 wait is
// at least limit (0: never).
func NewOverload(limit time.Duration) *Overload {
	return &Overload{limit: limit, period: sheddingPeriod, now: time.Now, read: readSchedLatencies}
}

// Shedding reports whether new connections are to be refused, reading
// the scheduler's latencies when the last reading is a period old.
func (o *Overload) Shedding() bool {
	if o == nil || o.limit <= 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := o.now(); o.last.IsZero() || now.Sub(o.last) >= o.period {
		o.last = now
		var h metrics.Float64Histogram
		o.read(&h)
		if len(o.prev) == len(h.Counts) {
			p99 := lowerQuantile(h.Buckets, h.Counts, o.prev, 0.99)
			o.shedding = !math.IsNaN(p99) && p99 >= o.limit.Seconds()
		}
		o.prev = h.Counts
	}
	return o.shedding
}

// lowerQuantile is the lower bound of the bucket holding the q-th
// quantile of the observations counts holds beyond prev; NaN when none.
// buckets are the len(counts)+1 boundaries.
func lowerQuantile(buckets []float64, counts, prev []uint64, q float64) float64 {
	var total uint64
	for i, c := range counts {
		total += c - prev[i]
	}
	if total == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var cum uint64
	for i, c := range counts {
		if cum += c - prev[i]; cum >= rank {
			return max(0, buckets[i]) // the first boundary is -Inf
		}
	}
	return math.NaN()
}

func readSchedLatencies(h *metrics.Float64Histogram) {
	s := []metrics.Sample{{Name: schedLatencies}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindFloat64Histogram {
		*h = *s[0].Value.Float64Histogram()
	}
}

// SchedLatencyBounds are the bounds provisiond_sched_latency_seconds
// serves the histogram at (seconds): the Go collector's own series of it
// has none between 0.12 s and +Inf, where overload shows.
var SchedLatencyBounds = []float64{0.0001, 0.001, 0.01, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30}

// SchedLatencies returns the runtime's histogram of goroutines' waits to
// run since the process started, rebinned to bounds (seconds, ascending):
// cumulative counts at each bound (a wait counts under the first bound
// not below its bucket's upper boundary) and the count of all, with an
// approximate sum (each wait at its bucket's lower boundary).
func SchedLatencies(bounds []float64) (cumulative []uint64, count uint64, sum float64) {
	var h metrics.Float64Histogram
	readSchedLatencies(&h)
	cumulative = make([]uint64, len(bounds))
	for i, c := range h.Counts {
		count += c
		lo, hi := max(0, h.Buckets[i]), h.Buckets[i+1]
		if !math.IsInf(lo, 0) {
			sum += float64(c) * lo
		}
		for j := len(bounds) - 1; j >= 0 && hi <= bounds[j]; j-- {
			cumulative[j] += c
		}
	}
	return cumulative, count, sum
}
