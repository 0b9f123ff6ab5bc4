package dashboard

import (
	"sync"
	"time"
)

// sampleEvery is the chart's resolution; historySize samples are kept
// (two minutes), so a page that connects draws the recent past at once.
// Each sample's rates are over rateWindow: a per-second sample of a
// bursty load reads 0 between bursts.
const (
	sampleEvery = time.Second
	historySize = 120
	rateWindow  = 10 * time.Second
)

// sample is one point of the chart.
type sample struct {
	T int64 `json:"t"` // Unix milliseconds
	// WindowS is the span in seconds the rates and the mean are over:
	// rateWindow, less while the sampler has not run that long.
	WindowS      float64 `json:"windowS"`
	RequestsPerS float64 `json:"requestsPerS"`
	LoginsPerS   float64 `json:"loginsPerS"`
	Agents       float64 `json:"agents"`
	// CommitMs is the mean commit latency over the window; nil when
	// nothing committed.
	CommitMs *float64 `json:"commitMs"`
}

// reading is the daemon's totals at one time.
type reading struct {
	at time.Time
	c  Counters
}

// sampler turns the daemon's running totals into rates over the last
// rateWindow. It has no goroutine: streams ask it for the latest sample
// on their own ticks, and the first to ask after sampleEvery takes a new
// one, so the daemon's metrics are read once a second however many
// streams are open, and not at all when none is.
type sampler struct {
	read func() Counters
	now  func() time.Time

	mu       sync.Mutex
	readings []reading // the last rateWindow of them, oldest first
	history  []sample
}

func newSampler(read func() Counters, now func() time.Time) *sampler {
	return &sampler{read: read, now: now}
}

// latest returns the samples taken after t (Unix ms), taking a new one
// when the last is older than sampleEvery.
func (s *sampler) latest(after int64) []sample {
	if s.read == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var last time.Time
	if n := len(s.readings); n > 0 {
		last = s.readings[n-1].at
	}
	if now.Sub(last) >= sampleEvery*9/10 {
		if !last.IsZero() && now.Sub(last) >= 5*sampleEvery {
			s.readings = s.readings[:0] // nobody asked for a while: a gap, not a rate
		}
		c := s.read()
		// The oldest reading kept is at most rateWindow old: the
		// sample is over the window from it to now.
		for len(s.readings) > 0 && now.Sub(s.readings[0].at) > rateWindow+sampleEvery/2 {
			s.readings = s.readings[1:]
		}
		if len(s.readings) > 0 {
			from := s.readings[0]
			secs := now.Sub(from.at).Seconds()
			p := sample{
				T:            now.UnixMilli(),
				WindowS:      secs,
				RequestsPerS: max(0, c.Requests-from.c.Requests) / secs,
				LoginsPerS:   max(0, c.Logins-from.c.Logins) / secs,
				Agents:       c.Agents,
			}
			if n := c.Commits - from.c.Commits; n > 0 {
				ms := (c.CommitSeconds - from.c.CommitSeconds) / n * 1000
				p.CommitMs = &ms
			}
			if len(s.history) == historySize {
				copy(s.history, s.history[1:])
				s.history = s.history[:historySize-1]
			}
			s.history = append(s.history, p)
		}
		s.readings = append(s.readings, reading{at: now, c: c})
	}
	var out []sample
	for _, p := range s.history {
		if p.T > after {
			out = append(out, p)
		}
	}
	return out
}
