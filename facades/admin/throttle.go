package admin

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/provisiond/provisiond/rpc/params"
)

// Throttle slows down password guessing (issue 17 item 8: user logins took
// 186-206 guesses a second, /backup's basic auth 86). It counts failed
// logins per key: the user name, the client's address, a machine agent
// (its model and tag). After Free failures of a key, a login with that key
// must wait: Base, then twice as long after each further failure, up to
// Max; meanwhile it is refused without checking the password (code "try
// again"). A key's failures are forgotten after Forget without one, and a
// user's or an agent's when it logs in. Nothing is locked for longer than
// Max, so the admin is never locked out for good; and the per-user key is
// not applied to clients on loopback, so guesses from elsewhere cannot
// keep an operator on the box out at all. Safe for concurrent use; a nil
// Throttle throttles nothing.
type Throttle struct {
	cfg ThrottleConfig

	mu   sync.Mutex // guards keys
	keys map[string]*failures
}

// ThrottleConfig configures a Throttle. Zero fields take the defaults.
type ThrottleConfig struct {
	Free    int           // failures of a key before backing off; default 5
	Base    time.Duration // the first wait; default 1 s
	Max     time.Duration // the longest wait; default 1 min
	Forget  time.Duration // a key without a failure this long is forgotten; default 15 min
	MaxKeys int           // keys tracked at most (the oldest go first); default 100,000
	Now     func() time.Time
	// Failed and Throttled, if set, are called for each failed login and
	// each login refused while backing off, with the path ("api",
	// "backup") and the kind ("user", "agent"): metrics.
	Failed, Throttled func(path, kind string)
}

// Throttle defaults.
const (
	DefaultLoginFailures   = 5
	DefaultLoginBackoff    = time.Second
	DefaultLoginBackoffMax = time.Minute
	defaultForget          = 15 * time.Minute
	defaultMaxKeys         = 100_000
)

type failures struct {
	n     int
	last  time.Time // of the last failure
	until time.Time // logins wait until then
}

// NewThrottle returns a throttle.
func NewThrottle(cfg ThrottleConfig) *Throttle {
	if cfg.Free <= 0 {
		cfg.Free = DefaultLoginFailures
	}
	if cfg.Base <= 0 {
		cfg.Base = DefaultLoginBackoff
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultLoginBackoffMax
	}
	if cfg.Forget <= 0 {
		cfg.Forget = max(defaultForget, cfg.Max)
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = defaultMaxKeys
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Throttle{cfg: cfg, keys: make(map[string]*failures)}
}

// LoginKeys are the keys of one login attempt.
type LoginKeys struct {
	keys []string
	path string // "api", "backup"
	kind string // "user", "agent"
	who  string // the user's or the agent's key, forgotten on success
}

// UserKeys are the keys of a user's login from remote (host:port): the
// user and the address, or only the address for a client on loopback.
func UserKeys(path, user, remote string) LoginKeys {
	host := hostOf(remote)
	k := LoginKeys{path: path, kind: "user", who: "user:" + user, keys: []string{"addr:" + host}}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		k.keys = append(k.keys, k.who)
	}
	return k
}

// AddressKeys are the keys of a login by a secret that names no user (a
// bearer token): the client's address.
func AddressKeys(path, remote string) LoginKeys {
	return LoginKeys{path: path, kind: "token", keys: []string{"addr:" + hostOf(remote)}}
}

// AgentKeys are the keys of a machine agent's login: the agent itself
// (agents behind one address, a NAT, do not slow each other down; their
// passwords are long and random, so guessing them is hopeless anyway).
func AgentKeys(model, tag string) LoginKeys {
	who := "agent:" + model + "/" + tag
	return LoginKeys{path: "api", kind: "agent", who: who, keys: []string{who}}
}

func hostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// Wait returns how long a login with k must wait (0: it may go ahead).
func (t *Throttle) Wait(k LoginKeys) time.Duration {
	if t == nil {
		return 0
	}
	now := t.cfg.Now()
	t.mu.Lock()
	var wait time.Duration
	for _, key := range k.keys {
		if f := t.keys[key]; f != nil && f.until.After(now) {
			wait = max(wait, f.until.Sub(now))
		}
	}
	t.mu.Unlock()
	if wait > 0 && t.cfg.Throttled != nil {
		t.cfg.Throttled(k.path, k.kind)
	}
	return wait
}

// Failed records a failed login with k.
func (t *Throttle) Failed(k LoginKeys) {
	if t == nil {
		return
	}
	if t.cfg.Failed != nil {
		t.cfg.Failed(k.path, k.kind)
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range k.keys {
		f := t.keys[key]
		if f != nil && now.Sub(f.last) > t.cfg.Forget {
			f = nil // forgotten
		}
		if f == nil {
			t.makeRoom(now)
			f = &failures{}
			t.keys[key] = f
		}
		f.n++
		f.last = now
		if over := f.n - t.cfg.Free; over > 0 {
			wait := t.cfg.Max
			if over <= 30 && t.cfg.Base<<(over-1) < t.cfg.Max {
				wait = t.cfg.Base << (over - 1)
			}
			f.until = now.Add(wait)
		}
	}
}

// Succeeded forgets the failures of the user or agent k logged in as (not
// of its address: logging in as oneself must not reset guesses at others).
func (t *Throttle) Succeeded(k LoginKeys) {
	if t == nil {
		return
	}
	t.mu.Lock()
	delete(t.keys, k.who)
	t.mu.Unlock()
}

// makeRoom drops forgotten keys when the table is full, and then the
// oldest one if it still is. Called with mu held.
func (t *Throttle) makeRoom(now time.Time) {
	if len(t.keys) < t.cfg.MaxKeys {
		return
	}
	var oldest string
	var at time.Time
	for key, f := range t.keys {
		if now.Sub(f.last) > t.cfg.Forget {
			delete(t.keys, key)
			continue
		}
		if oldest == "" || f.last.Before(at) {
			oldest, at = key, f.last
		}
	}
	if len(t.keys) >= t.cfg.MaxKeys {
		delete(t.keys, oldest)
	}
}

// Keys returns the number of keys tracked (for tests).
func (t *Throttle) Keys() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// ThrottledError refuses a login while its keys back off.
func ThrottledError(wait time.Duration) error {
	return &params.Error{
		Message: fmt.Sprintf("too many failed logins; try again in %s", (wait + time.Second - 1).Truncate(time.Second)),
		Code:    params.CodeTryAgain,
	}
}
