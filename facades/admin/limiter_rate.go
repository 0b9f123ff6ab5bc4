package admin

import "time"

// SetRate changes the token bucket of a running limiter (a reload of
// --login-rate-max and --login-rate-refill): the bucket's size and refill
// time, the tokens held kept but at most the new size. Zero or negative
// values disable the rate limit. The concurrency cap does not change.
func (l *Limiter) SetRate(max int, refill time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.max, l.perToken = float64(max), refill
	if l.tokens > l.max {
		l.tokens = l.max
	}
}
