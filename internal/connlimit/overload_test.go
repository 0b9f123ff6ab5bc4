package connlimit

import (
	"errors"
	"math"
	"net"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"
)

// fakeSched is a scheduler histogram the test fills: buckets as the
// runtime's (the first boundary -Inf), counts cumulative since "start".
type fakeSched struct {
	buckets []float64
	counts  []uint64
}

func newFakeSched() *fakeSched {
	return &fakeSched{buckets: []float64{math.Inf(-1), 0.001, 0.01, 0.1, 1, 10, math.Inf(1)}, counts: make([]uint64, 6)}
}

// add records n waits in the bucket starting at lower.
func (f *fakeSched) add(lower float64, n uint64) {
	for i, b := range f.buckets[:len(f.buckets)-1] {
		if b == lower || (i == 0 && lower < f.buckets[1]) {
			f.counts[i] += n
			return
		}
	}
	panic("no bucket")
}

func (f *fakeSched) read(h *metrics.Float64Histogram) {
	h.Buckets = f.buckets
	h.Counts = append([]uint64(nil), f.counts...)
}

func newFakeOverload(limit time.Duration, f *fakeSched, now *time.Time) *Overload {
	o := NewOverload(limit)
	o.read, o.now = f.read, func() time.Time { return *now }
	return o
}

// The gate sheds while the p99 of the waits that ended since its last
// reading is at least the limit, by its bucket's lower bound; it reads at
// most once a period, the first reading only sets the base; a reading in
// which no wait ended, or one under the limit, ends shedding.
func TestOverloadSheds(t *testing.T) {
	f, now := newFakeSched(), time.Unix(1000, 0)
	o := newFakeOverload(time.Second, f, &now)
	step := func(want bool, why string) {
		t.Helper()
		now = now.Add(sheddingPeriod)
		if got := o.Shedding(); got != want {
			t.Fatalf("%s: shedding %v; want %v", why, got, want)
		}
	}
	f.add(10, 1000) // before the first reading: not this period's
	step(false, "the first reading")
	f.add(0.001, 985)
	f.add(1, 15) // 1.5% of the waits in [1 s, 10 s): p99 at least 1 s
	step(true, "p99 in [1 s, 10 s)")
	f.add(1, 1000) // within the period: not read again
	if !o.Shedding() {
		t.Fatal("read again within the period")
	}
	now = now.Add(sheddingPeriod / 2)
	if !o.Shedding() {
		t.Fatal("read again within the period")
	}
	f.add(0.001, 989)
	f.add(1, 10) // 1% (with the 1,000 above: most)
	step(true, "the waits since the last reading")
	step(false, "no wait ended")
	f.add(0.1, 1000) // p99 in [0.1 s, 1 s): under the limit
	step(false, "p99 under the limit")
	f.add(0.001, 990)
	f.add(10, 10) // exactly 1%: the 99th percentile is still under
	step(false, "1% of the waits over the limit")
	f.add(0.001, 989)
	f.add(10, 11)
	step(true, "1.1% of the waits over the limit")

	off := newFakeOverload(0, f, &now)
	f.add(10, 1000)
	now = now.Add(sheddingPeriod)
	if off.Shedding() || (*Overload)(nil).Shedding() {
		t.Error("a limit of 0, or no gate, sheds")
	}
}

// lowerQuantile over the runtime's own histogram: what the process reads.
func TestSchedLatenciesRead(t *testing.T) {
	cum, count, sum := SchedLatencies(SchedLatencyBounds)
	if len(cum) != len(SchedLatencyBounds) || count == 0 || sum < 0 {
		t.Fatalf("SchedLatencies = %v, %d, %v", cum, count, sum)
	}
	for i := 1; i < len(cum); i++ {
		if cum[i] < cum[i-1] || cum[i] > count {
			t.Fatalf("not cumulative: %v of %d", cum, count)
		}
	}
	o := NewOverload(time.Hour)
	o.Shedding() // the base
	o.last = time.Time{}
	if o.Shedding() {
		t.Error("sheds at an hour's limit")
	}
}

// While the gate sheds, a new connection but the local operator's is
// reset at accept and counted as refused for overload; the operator's is
// accepted; once a reading is under the limit, connections are accepted
// again.
func TestListenerShedsUnderOverload(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	l := newListener(tcp, newConnLimits(100, 0, 0), func(r string) { refused = append(refused, r) })
	defer l.Close()
	f, now := newFakeSched(), time.Unix(1000, 0)
	o := newFakeOverload(time.Second, f, &now)
	l.Shed(o)
	o.Shedding() // the base
	f.add(10, 100)
	now = now.Add(sheddingPeriod)

	// startAccept runs one Accept; accepted waits for what it returns.
	startAccept := func() <-chan net.Conn {
		ch := make(chan net.Conn, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				t.Error(err)
			}
			ch <- c
		}()
		return ch
	}
	accepted := func(ch <-chan net.Conn, what string) {
		t.Helper()
		select {
		case c := <-ch:
			if c == nil {
				t.FailNow()
			}
			c.Close()
		case <-time.After(10 * time.Second):
			t.Fatalf("Accept did not return %s", what)
		}
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// The test's connections are this user's: the local operator's.
	dial()
	accepted(startAccept(), "the operator's connection")
	if len(refused) != 0 {
		t.Fatalf("the operator's connection refused: %q", refused)
	}

	// With no user the operator, they are anyone's (the daemon's tests
	// tell users apart by their sockets' owners, internal/asuser).
	l.operators = map[uint32]bool{}
	c1 := dial()
	ch := startAccept()
	_ = c1.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c1.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the connection made while shedding read %v; want a reset", err)
	}
	// The next reading is under the limit (the fake is read with o.mu
	// held, by the Accept under way).
	o.mu.Lock()
	f.add(0.001, 100)
	now = now.Add(sheddingPeriod)
	o.mu.Unlock()
	dial()
	accepted(ch, "after the overload")
	if len(refused) != 1 || refused[0] != RefusedOverload {
		t.Fatalf("refused %q; want one %q", refused, RefusedOverload)
	}
}
