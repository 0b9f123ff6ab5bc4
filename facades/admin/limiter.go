package admin

import (
	"context"
	"sync"
	"time"
)

// Limiter admits agent logins: a cap on logins running at once, for
// which a login waits up to Wait (in its own handler goroutine; each
// connection has at most one login under way, so the connection cap
// bounds the waiters), and a token bucket (Max tokens, one more every
// Refill), which never waits. A refused login gets "try again" and the
// agent backs off. Safe for concurrent use.
//
// A login refused costs the daemon its TLS handshake and websocket
// upgrade, already done, and the agent's retry costs them again: the cap
// with a wait admits as fast as logins complete, which is what the daemon
// can do, where a rate below that refuses logins it could have served
// (a bucket of 500 a second refused 7,000-17,650 logins in each storm of
// 10,000 agents: docs/performance.md, "The login limiter").
type Limiter struct {
	concurrent chan struct{}
	wait       time.Duration
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
	// Wait is how long a login waits for one of the Concurrent slots
	// before it is refused (0: it does not wait).
	Wait time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Throttle slows down the failed logins of users and agents (nil:
	// none).
	Throttle *Throttle
}

// NewLimiter returns a limiter with a full bucket.
func NewLimiter(cfg LimiterConfig) *Limiter {
	l := &Limiter{max: float64(cfg.Max), perToken: cfg.Refill, wait: cfg.Wait, now: cfg.Now, throttle: cfg.Throttle}
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

// Acquire takes a concurrency slot, waiting up to the limiter's Wait (or
// until ctx ends) for one, then a token without waiting. On success it
// returns the function that releases the slot; ok is false when the login
// must be refused.
func (l *Limiter) Acquire(ctx context.Context) (release func(), ok bool) {
	if l == nil {
		return func() {}, true
	}
	release = func() {}
	if l.concurrent != nil {
		if !l.slot(ctx) {
			return nil, false
		}
		release = func() { <-l.concurrent }
	}
	if !l.token() {
		release()
		return nil, false
	}
	return release, true
}

// slot takes a concurrency slot, waiting up to l.wait for one.
func (l *Limiter) slot(ctx context.Context) bool {
	select {
	case l.concurrent <- struct{}{}:
		return true
	default:
	}
	if l.wait <= 0 {
		return false
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.concurrent <- struct{}{}: // waiters are served in turn (the channel's queue)
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// token takes a token from the bucket, if rate limiting is on.
func (l *Limiter) token() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max <= 0 || l.perToken <= 0 {
		return true
	}
	now := l.now()
	l.tokens += float64(now.Sub(l.last)) / float64(l.perToken)
	if l.tokens > l.max {
		l.tokens = l.max
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}
