package admin

import (
	"sync"
	"time"
)

// Limiter admits agent logins: a token bucket (Max tokens, one more every
// Refill) and a cap on logins running at once. It never waits; a refused
// login gets "try again" and the agent backs off. Safe for concurrent use.
type Limiter struct {
	concurrent chan struct{}
	now        func() time.Time
	throttle   *Throttle

	mu       sync.Mutex // guards the fields below
	max      float64
	perToken time.Duration
	tokens   float64
	last     time.Time
}

// LimiterConfig configures a Limiter. Zero or negative values disable that
// limit.
type LimiterConfig struct {
	// Max is the bucket size (Juju's agent-ratelimit-max).
	Max int
	// Refill is the time to earn one token (Juju's agent-ratelimit-rate).
	Refill time.Duration
	// Concurrent caps agent logins in progress at once.
	Concurrent int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Throttle slows down the failed logins of users and agents (nil:
	// none).
	Throttle *Throttle
}

// NewLimiter returns a limiter with a full bucket.
func NewLimiter(cfg LimiterConfig) *Limiter {
	l := &Limiter{max: float64(cfg.Max), perToken: cfg.Refill, now: cfg.Now, throttle: cfg.Throttle}
	if l.now == nil {
		l.now = time.Now
	}
	if cfg.Concurrent > 0 {
		l.concurrent = make(chan struct{}, cfg.Concurrent)
	}
	l.tokens = l.max
	l.last = l.now()
	return l
}

// Throttle is the failed-login throttle (nil: none).
func (l *Limiter) Throttle() *Throttle {
	if l == nil {
		return nil
	}
	return l.throttle
}

// Acquire takes a token and a concurrency slot without waiting. On success
// it returns the function that releases the slot; ok is false when the
// login must be refused.
func (l *Limiter) Acquire() (release func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	l.mu.Lock()
	if l.max > 0 && l.perToken > 0 {
		now := l.now()
		l.tokens += float64(now.Sub(l.last)) / float64(l.perToken)
		if l.tokens > l.max {
			l.tokens = l.max
		}
		l.last = now
		if l.tokens < 1 {
			l.mu.Unlock()
			return nil, false
		}
		l.tokens--
	}
	l.mu.Unlock()
	if l.concurrent == nil {
		return func() {}, true
	}
	select {
	case l.concurrent <- struct{}{}:
		return func() { <-l.concurrent }, true
	default:
		return nil, false
	}
}
