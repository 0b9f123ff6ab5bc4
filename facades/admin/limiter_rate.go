package admin

import "time"

// SetRate changes the token bucket of a running limiter (a reload of
// --login-rate-max and --login-rate-refill): the bucket's size and refill
// time, the tokens held kept but at most the new size. Zero or negative
// values disable the rate limit; turning it on starts with a full bucket.
// The concurrency cap does not change.
func (l *Limiter) SetRate(max int, refill time.Duration) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	wasOff := l.max <= 0 || l.perToken <= 0
	l.max, l.perToken = float64(max), refill
	if wasOff { // turned on: a full bucket, as a limiter starts with
		l.tokens, l.last = l.max, l.now()
	}
	if l.tokens > l.max {
		l.tokens = l.max
	}
}
