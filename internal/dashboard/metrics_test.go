package dashboard

import (
	"testing"
	"time"
)

// The chart's rates are over the last rateWindow: a burst is still seen
// seconds later (a per-second sample would read 0), and the window's
// span is said.
func TestSamplerRatesOverAWindow(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
	var totals Counters
	s := newSampler(func() Counters { return totals }, c.now)
	var last sample
	step := func() {
		c.add(time.Second)
		ss := s.latest(0)
		last = ss[len(ss)-1]
	}
	s.latest(0) // the first reading: no sample yet
	totals.Requests = 50
	step() // the burst: 50 requests in the first second
	if last.RequestsPerS != 50 || last.WindowS != 1 {
		t.Fatalf("after the burst: %+v", last)
	}
	for range 4 {
		step()
	}
	if last.RequestsPerS != 10 || last.WindowS != 5 {
		t.Errorf("4 s after the burst: %+v, want 50 requests over 5 s", last)
	}
	for range 5 {
		step()
	}
	if last.WindowS != rateWindow.Seconds() || last.RequestsPerS != 5 {
		t.Errorf("10 s after: %+v, want 50 requests over the %v window", last, rateWindow)
	}
	step()
	if last.RequestsPerS != 0 {
		t.Errorf("once the burst has left the window: %+v", last)
	}
}
