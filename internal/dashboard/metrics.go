package dashboard

import (
	"sync"
	"time"
)

// sampleEvery is the chart's resolution; historySize samples are kept
// (two minutes), so a page that connects draws the recent past at once.
const (
	sampleEvery = time.Second
	historySize = 120
)

// sample is one point of the chart.
type sample struct {
	T            int64   `json:"t"` // Unix milliseconds
	RequestsPerS float64 `json:"requestsPerS"`
	LoginsPerS   float64 `json:"loginsPerS"`
	Agents       float64 `json:"agents"`
	// CommitMs is the mean commit latency over the interval; nil when
	// nothing committed.
	CommitMs *float64 `json:"commitMs"`
}

// sampler turns the daemon's running totals into rates. It has no
// goroutine: streams ask it for the latest sample on their own ticks, and
// the first to ask after sampleEvery takes a new one, so the daemon's
// metrics are read once a second however many streams are open, and not
// at all when none is.
type sampler struct {
	read func() Counters
	now  func() time.Time

	mu      sync.Mutex
	last    Counters
	lastAt  time.Time
	history []sample
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
	if now.Sub(s.lastAt) >= sampleEvery*9/10 {
		c := s.read()
		if !s.lastAt.IsZero() && now.Sub(s.lastAt) < 5*sampleEvery {
			secs := now.Sub(s.lastAt).Seconds()
			p := sample{
				T:            now.UnixMilli(),
				RequestsPerS: max(0, c.Requests-s.last.Requests) / secs,
				LoginsPerS:   max(0, c.Logins-s.last.Logins) / secs,
				Agents:       c.Agents,
			}
			if n := c.Commits - s.last.Commits; n > 0 {
				ms := (c.CommitSeconds - s.last.CommitSeconds) / n * 1000
				p.CommitMs = &ms
			}
			if len(s.history) == historySize {
				copy(s.history, s.history[1:])
				s.history = s.history[:historySize-1]
			}
			s.history = append(s.history, p)
		}
		s.last, s.lastAt = c, now
	}
	var out []sample
	for _, p := range s.history {
		if p.T > after {
			out = append(out, p)
		}
	}
	return out
}
