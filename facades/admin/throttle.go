package admin

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/provisiond/provisiond/rpc/params"
)

// Throttle slows down password guessing without letting guesses keep
// anyone else out (docs/reliability.md, "Connections and logins under
// attack"). It counts failed logins under three kinds of key:
//
//   - the pair (identity, client): a user or an agent, from one client.
//     After Free failures its logins wait: Base, then twice as long after
//     each further failure, up to Max; meanwhile they are refused without
//     checking the password (code "try again"). A success forgets it.
//   - the identity (users only), across clients: after IdentityFree
//     failures from clients the user has not logged in from, logins of it
//     from such clients wait in the same way; from a client it has logged
//     in from since the daemon started (familiar), and from the local
//     operator's connections, never: guesses from elsewhere cannot keep a
//     user out where it works.
//   - the client (users only), across identities: after ClientFree
//     failures from it, its pairs have no free failures left: a name that
//     has failed from it waits from its first failure. A name that has not
//     failed from it is checked as ever, so a client that sprays unknown
//     names delays only the names it guesses at.
//
// A client is what one host can rotate through (ClientOf): an IPv4
// address, an IPv6 /64; on the daemon's own host a local user
// (ThrottleConfig.Client). Agents are keyed by pair only: their passwords
// are random and at least 18 bytes, and agents behind one address (a NAT)
// must not slow each other down.
//
// Attempts under way count as failures to come, so a key beyond its free
// failures lets one attempt through at a time and concurrent guesses
// cannot slip past the count: for a user from a client it is not
// familiar at, from the first attempt; otherwise (agents, familiar
// clients, the operator) once the key has failed, so that until then
// logins with the right password go in parallel (the controller agent
// opens many at once). A key's failures are forgotten after Forget
// without one; nothing waits longer than Max. Refusals are answers, not
// sleeps: a throttled login holds no goroutine. Safe for concurrent use;
// a nil Throttle throttles nothing.
type Throttle struct {
	cfg ThrottleConfig

	mu       sync.Mutex // guards the fields below
	keys     map[string]*failures
	familiar map[string]time.Time // identity + client → last login
}

// ThrottleConfig configures a Throttle. Zero fields take the defaults.
type ThrottleConfig struct {
	Free    int           // failures of a pair before backing off; default 5
	Base    time.Duration // the first wait; default 1 s
	Max     time.Duration // the longest wait; default 1 min
	Forget  time.Duration // a key without a failure this long is forgotten; default 15 min
	MaxKeys int           // keys tracked at most (the least recently seen of a sample go first); default 100,000
	// IdentityFree and ClientFree are the failures of a user across
	// clients, and of a client across users, before they back off;
	// default 4 x Free each.
	IdentityFree, ClientFree int
	Now                      func() time.Time
	// Client names the client of a remote address (host:port); nil:
	// ClientOfRemote.
	Client func(remote string) Client
	// Failed and Throttled, if set, are called for each failed login and
	// each login refused while backing off, with the path ("api",
	// "backup", "metrics", "dashboard") and the kind ("user", "agent",
	// "token"): metrics.
	Failed, Throttled func(path, kind string)
}

// Throttle defaults.
const (
	DefaultLoginFailures   = 5
	DefaultLoginBackoff    = time.Second
	DefaultLoginBackoffMax = time.Minute
	defaultForget          = 15 * time.Minute
	defaultMaxKeys         = 100_000
	// manyFree is how many times Free a user's or a client's failures
	// across the other dimension may be.
	manyFree = 4
	// familiarFor is how long a login from a client makes that client
	// familiar to its identity; maxFamiliar bounds how many such pairs are
	// kept (the least recent go first).
	familiarFor = 7 * 24 * time.Hour
	maxFamiliar = 10_000
	// evictSample is how many keys are looked at to find one to drop
	// when the table is full.
	evictSample = 16
)

type failures struct {
	n        int       // failures, not counting those forgotten
	inflight int       // attempts begun whose outcome is not known yet
	last     time.Time // of the last failure
	seen     time.Time // of the last failure, attempt or refusal (eviction)
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
	if cfg.IdentityFree <= 0 {
		cfg.IdentityFree = manyFree * cfg.Free
	}
	if cfg.ClientFree <= 0 {
		cfg.ClientFree = manyFree * cfg.Free
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		cfg.Client = ClientOfRemote
	}
	return &Throttle{cfg: cfg, keys: make(map[string]*failures), familiar: make(map[string]time.Time)}
}

// Client is the client a login comes from, as the throttle counts it.
type Client struct {
	// Key names it: "192.0.2.1", "2001:db8::/64", "loopback", or on the
	// daemon's host "local user 1000".
	Key string
	// Operator is true for the local operator's connections: a process on
	// the daemon's host running as the daemon's user or root.
	Operator bool
}

// ClientOf names the client of address ip: what one host can rotate
// through. IPv4 addresses are each their own, IPv6 ones go by their /64
// (a host is given a /64; a link-local address by itself), and every
// loopback address is one client.
func ClientOf(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "unknown"
	case ip.IsLoopback():
		return "loopback"
	case ip.Is4(), ip.IsLinkLocalUnicast():
		return ip.WithZone("").String()
	}
	p, _ := ip.Prefix(64)
	return p.String()
}

// ClientOfRemote is the client of a remote address (host:port), by its
// address alone (never the operator's).
func ClientOfRemote(remote string) Client {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	ip, _ := netip.ParseAddr(host)
	return Client{Key: ClientOf(ip)}
}

// LoginKeys are the keys of one login attempt.
type LoginKeys struct {
	path     string // "api", "backup", "metrics", "dashboard"
	kind     string // "user", "agent", "token"
	identity string
	client   Client
	// waitOnly: the keys' waits apply, their failures are not counted.
	waitOnly bool
}

// WaitOnly returns k whose waits apply to a login but whose failures
// are not counted (metrics aside).
func (k LoginKeys) WaitOnly() LoginKeys {
	k.waitOnly = true
	return k
}

// UserKeys are the keys of a user's login from remote (host:port); user
// is a name or a user tag, local.
func (t *Throttle) UserKeys(path, user, remote string) LoginKeys {
	user = strings.TrimSuffix(strings.TrimPrefix(user, "user-"), "@local")
	return LoginKeys{path: path, kind: "user", identity: "user " + user, client: t.client(remote)}
}

// AgentKeys are the keys of a machine agent's login from remote: the
// machine tag of model, from that client.
func (t *Throttle) AgentKeys(model, tag, remote string) LoginKeys {
	return LoginKeys{path: "api", kind: "agent", identity: "agent " + model + " " + tag, client: t.client(remote)}
}

// TokenKeys are the keys of a login by a secret that names no user (a
// bearer token), from remote.
func (t *Throttle) TokenKeys(path, remote string) LoginKeys {
	return LoginKeys{path: path, kind: "token", identity: "token", client: t.client(remote)}
}

func (t *Throttle) client(remote string) Client {
	if t == nil {
		return ClientOfRemote(remote)
	}
	return t.cfg.Client(remote)
}

func (k LoginKeys) pairKey() string     { return "pair\x00" + k.identity + "\x00" + k.client.Key }
func (k LoginKeys) identityKey() string { return "identity\x00" + k.identity }
func (k LoginKeys) clientKey() string   { return "client\x00" + k.client.Key }
func (k LoginKeys) familiarKey() string { return k.identity + "\x00" + k.client.Key }

// Attempt is a login let through by Begin. Exactly one of Failed,
// Succeeded and Abandon must be called once its outcome is known; a nil
// Attempt (from a nil Throttle) ignores them.
type Attempt struct {
	t    *Throttle
	k    LoginKeys
	held []*failures // the keys counting it in flight
	// across: the identity and client keys count its failure (a user's
	// login from a client it is not familiar at).
	across bool
}

// Begin lets a login with k go ahead, or returns how long it must wait
// (refused unchecked). A login let through counts against its keys until
// its outcome is reported on the Attempt.
func (t *Throttle) Begin(k LoginKeys) (*Attempt, time.Duration) {
	if t == nil {
		return nil, 0
	}
	now := t.cfg.Now()
	t.mu.Lock()
	user := k.kind == "user"
	across := user && !k.client.Operator && !t.isFamiliar(k, now)
	pairFree := t.cfg.Free
	if across && t.over(t.keys[k.clientKey()], t.cfg.ClientFree, now) {
		pairFree = 0 // the client guesses at many names: no free failures for any
	}
	pair := t.entry(k.pairKey(), now)
	wait := t.wait(pair, pairFree, across, now)
	pair.inflight++ // held from here, so the next entry cannot evict it
	a := &Attempt{t: t, k: k, held: []*failures{pair}, across: across}
	if across {
		identity := t.entry(k.identityKey(), now)
		wait = max(wait, t.wait(identity, t.cfg.IdentityFree, true, now))
		identity.inflight++
		a.held = append(a.held, identity)
	}
	if wait > 0 {
		for _, f := range a.held {
			f.inflight--
		}
		t.mu.Unlock()
		if t.cfg.Throttled != nil {
			t.cfg.Throttled(k.path, k.kind)
		}
		return nil, wait
	}
	t.mu.Unlock()
	return a, 0
}

// Failed reports a wrong password or an unknown identity.
func (a *Attempt) Failed() {
	if a == nil {
		return
	}
	t := a.t
	if t.cfg.Failed != nil {
		t.cfg.Failed(a.k.path, a.k.kind)
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.across && !a.k.waitOnly { // first: the held keys cannot be evicted yet
		t.fail(t.entry(a.k.clientKey(), now), now)
	}
	for _, f := range a.held {
		f.inflight--
		if !a.k.waitOnly {
			t.fail(f, now)
		}
	}
}

// Succeeded reports a login with the right credentials: the pair's
// failures are forgotten (not the identity's from elsewhere, nor the
// client's at other names) and the client becomes familiar to a user.
func (a *Attempt) Succeeded() {
	if a == nil {
		return
	}
	t := a.t
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range a.held {
		f.inflight--
	}
	if pair := a.held[0]; pair.inflight == 0 {
		delete(t.keys, a.k.pairKey())
	} else {
		pair.n = 0
	}
	if a.k.kind == "user" {
		t.makeFamiliar(a.k, now)
	}
}

// Abandon reports an attempt that said nothing about the credentials (an
// internal error).
func (a *Attempt) Abandon() {
	if a == nil {
		return
	}
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	for _, f := range a.held {
		f.inflight--
	}
}

// entry returns key's entry, made if missing, with failures older than
// Forget forgotten; t.mu is held.
func (t *Throttle) entry(key string, now time.Time) *failures {
	f := t.keys[key]
	if f == nil {
		if len(t.keys) >= t.cfg.MaxKeys {
			t.evict(now)
		}
		f = &failures{}
		t.keys[key] = f
	}
	if f.n > 0 && now.Sub(f.last) > t.cfg.Forget {
		f.n = 0
	}
	f.seen = now
	return f
}

// over reports whether f has more than free failures; t.mu is held.
func (t *Throttle) over(f *failures, free int, now time.Time) bool {
	return f != nil && f.n > free && now.Sub(f.last) <= t.cfg.Forget
}

// wait is how long an attempt under f must wait given its free failures:
// none within them; beyond them, each a backoff after the last failure.
// The attempts under way count as failures to come (one at a time beyond
// the free ones) once f has failed, or from the first if strict. t.mu is
// held.
func (t *Throttle) wait(f *failures, free int, strict bool, now time.Time) time.Duration {
	if f.inflight > 0 && (f.n > 0 || strict) {
		if f.n+f.inflight <= free {
			return 0
		}
		return t.cfg.Base // the attempts under way decide the next wait
	}
	over := f.n - free
	if over <= 0 {
		return 0
	}
	wait := t.cfg.Max
	if over <= 30 && t.cfg.Base<<(over-1) < t.cfg.Max {
		wait = t.cfg.Base << (over - 1)
	}
	return max(0, f.last.Add(wait).Sub(now))
}

// fail counts a failure under f; t.mu is held.
func (t *Throttle) fail(f *failures, now time.Time) {
	if f.n > 0 && now.Sub(f.last) > t.cfg.Forget {
		f.n = 0
	}
	f.n++
	f.last, f.seen = now, now
}

// evict drops the least recently seen of a sample of keys, preferring
// one with nothing to remember, never one with an attempt under way; t.mu
// is held.
func (t *Throttle) evict(now time.Time) {
	key := sampleOldest(t.keys, func(f *failures) (time.Time, bool) {
		if f.n == 0 || now.Sub(f.seen) > t.cfg.Forget {
			return time.Time{}, f.inflight == 0 // nothing to remember
		}
		return f.seen, f.inflight == 0
	})
	if key != "" {
		delete(t.keys, key)
	}
}

// sampleOldest returns the key of the least recently seen of a few
// entries of m ("" if none qualifies): Go's map iteration starts at a
// random place, so the few are a sample. seen says when an entry was last
// seen, and whether it may go.
func sampleOldest[V any](m map[string]V, seen func(V) (time.Time, bool)) string {
	var oldest string
	var at time.Time
	i := 0
	for key, v := range m {
		if i++; i > evictSample {
			break
		}
		if when, ok := seen(v); ok && (oldest == "" || when.Before(at)) {
			oldest, at = key, when
		}
	}
	return oldest
}

// isFamiliar reports whether k's identity logged in from k's client
// within familiarFor; t.mu is held.
func (t *Throttle) isFamiliar(k LoginKeys, now time.Time) bool {
	at, ok := t.familiar[k.familiarKey()]
	return ok && now.Sub(at) <= familiarFor
}

// makeFamiliar records a login of k's identity from k's client; t.mu is
// held.
func (t *Throttle) makeFamiliar(k LoginKeys, now time.Time) {
	key := k.familiarKey()
	if _, ok := t.familiar[key]; !ok && len(t.familiar) >= maxFamiliar {
		delete(t.familiar, sampleOldest(t.familiar, func(at time.Time) (time.Time, bool) { return at, true }))
	}
	t.familiar[key] = now
}

// Keys returns the number of keys tracked (for tests).
func (t *Throttle) Keys() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// ThrottledError refuses a login while its keys back off. Its error-info
// carries the wait in whole seconds as "retry-after" (HTTP's Retry-After
// in spirit), for clients that wait and try again; Juju's ignore it.
func ThrottledError(wait time.Duration) error {
	secs := (wait + time.Second - 1).Truncate(time.Second)
	return &params.Error{
		Message: fmt.Sprintf("too many failed logins; try again in %s", secs),
		Code:    params.CodeTryAgain,
		Info:    map[string]any{"retry-after": int(secs / time.Second)},
	}
}
