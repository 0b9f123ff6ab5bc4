package watcher

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
)

// Stopper is anything a connection owns and stops when it ends.
type Stopper interface {
	Stop() error
}

// ErrUnknownResource is returned for an id the connection does not hold.
// Facades map it to "unknown watcher id", code "not found".
var ErrUnknownResource = errors.New("unknown watcher id")

// ErrResourcesClosed is returned by Register after StopAll.
var ErrResourcesClosed = errors.New("connection is shut down")

// TooManyError is returned by Register when the connection already holds
// its maximum number of resources, or its entity does (Scope says which).
type TooManyError struct {
	Max int
	// Scope is "" for the connection's own limit, else what the shared
	// Quota counts ("for machine-3 across its connections").
	Scope string
}

func (e *TooManyError) Error() string {
	scope := e.Scope
	if scope == "" {
		scope = "on this connection"
	}
	return fmt.Sprintf("too many watchers %s (limit %d)", scope, e.Max)
}

// Quota is a number of resources shared by the Resources of several
// connections (one entity's): a Resources that Shares it takes one unit
// for each resource it registers and gives it back when that resource is
// stopped. It is safe for concurrent use.
type Quota struct {
	max   int
	scope string

	mu sync.Mutex
	n  int
}

// NewQuota returns a quota of max resources; scope names it in
// TooManyError.
func NewQuota(max int, scope string) *Quota { return &Quota{max: max, scope: scope} }

// Used returns the units taken.
func (q *Quota) Used() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

func (q *Quota) take() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n >= q.max {
		return false
	}
	q.n++
	return true
}

func (q *Quota) give(n int) {
	q.mu.Lock()
	q.n -= n
	q.mu.Unlock()
}

// Resources is one connection's registry of resources, with ids "1", "2",
// ... that are never reused. It is safe for concurrent use.
type Resources struct {
	max int

	mu      sync.Mutex // guards the fields below
	next    uint64
	m       map[string]Stopper
	stopped bool
	shared  *Quota // nil: none
}

// Share makes the resources registered from now on count against q too
// (the entity's quota, set at login).
func (r *Resources) Share(q *Quota) {
	r.mu.Lock()
	r.shared = q
	r.mu.Unlock()
}

// NewResources returns an empty registry holding at most max resources
// (max <= 0: no limit).
func NewResources(max int) *Resources {
	return &Resources{max: max, m: make(map[string]Stopper)}
}

// Register adds s and returns its id. After StopAll, or over the limit, it
// stops s itself and returns an error, so the caller never leaks it.
func (r *Resources) Register(s Stopper) (string, error) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		_ = s.Stop()
		return "", ErrResourcesClosed
	}
	if r.max > 0 && len(r.m) >= r.max {
		r.mu.Unlock()
		_ = s.Stop()
		return "", &TooManyError{Max: r.max}
	}
	if q := r.shared; q != nil && !q.take() {
		r.mu.Unlock()
		_ = s.Stop()
		return "", &TooManyError{Max: q.max, Scope: q.scope}
	}
	r.next++
	id := strconv.FormatUint(r.next, 10)
	r.m[id] = s
	r.mu.Unlock()
	return id, nil
}

// Get returns the resource with id, or ErrUnknownResource.
func (r *Resources) Get(id string) (Stopper, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[id]
	if !ok {
		return nil, ErrUnknownResource
	}
	return s, nil
}

// Stop stops and removes the resource with id; an unknown id gives
// ErrUnknownResource.
func (r *Resources) Stop(id string) error {
	r.mu.Lock()
	s, ok := r.m[id]
	if ok {
		delete(r.m, id)
		if r.shared != nil {
			r.shared.give(1)
		}
	}
	r.mu.Unlock()
	if !ok {
		return ErrUnknownResource
	}
	return s.Stop()
}

// Len returns how many resources are held.
func (r *Resources) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// StopAll stops every resource, newest first, and refuses later
// registrations. It is idempotent.
func (r *Resources) StopAll() {
	r.mu.Lock()
	r.stopped = true
	ids := make([]uint64, 0, len(r.m))
	for id := range r.m {
		n, _ := strconv.ParseUint(id, 10, 64)
		ids = append(ids, n)
	}
	slices.Sort(ids)
	all := make([]Stopper, 0, len(ids))
	for i := len(ids) - 1; i >= 0; i-- {
		all = append(all, r.m[strconv.FormatUint(ids[i], 10)])
	}
	r.m = make(map[string]Stopper)
	if r.shared != nil {
		r.shared.give(len(all))
	}
	r.mu.Unlock()
	for _, s := range all {
		_ = s.Stop()
	}
}
