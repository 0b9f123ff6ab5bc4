package watcher

import (
	"cmp"
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
//
// The resources are kept in a slice in id order (ids only grow, so a new
// one is appended), found by binary search: an agent's few watchers cost
// a few words each, not a map. A stopped resource leaves a hole that is
// compacted away once holes are half the slice, so stopping any number
// costs amortised O(1).
type Resources struct {
	max int

	mu      sync.Mutex // guards the fields below
	next    uint64
	held    []resource // in id order; a nil s is a stopped one's hole
	live    int        // non-nil entries of held
	stopped bool
	shared  *Quota // nil: none
}

// resource is one entry of Resources.held.
type resource struct {
	id uint64
	s  Stopper
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
	return &Resources{max: max}
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
	if r.max > 0 && r.live >= r.max {
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
	r.held = append(r.held, resource{id: r.next, s: s})
	r.live++
	id := r.next
	r.mu.Unlock()
	return strconv.FormatUint(id, 10), nil
}

// findLocked returns the index in held of the live resource with id, or
// -1. An id is only ever written as Register wrote it: "01" is unknown.
func (r *Resources) findLocked(id string) int {
	if id == "" || id[0] == '0' {
		return -1
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return -1
	}
	i, ok := slices.BinarySearchFunc(r.held, n, func(e resource, n uint64) int { return cmp.Compare(e.id, n) })
	if !ok || r.held[i].s == nil {
		return -1
	}
	return i
}

// Get returns the resource with id, or ErrUnknownResource.
func (r *Resources) Get(id string) (Stopper, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.findLocked(id)
	if i < 0 {
		return nil, ErrUnknownResource
	}
	return r.held[i].s, nil
}

// Stop stops and removes the resource with id; an unknown id gives
// ErrUnknownResource.
func (r *Resources) Stop(id string) error {
	r.mu.Lock()
	i := r.findLocked(id)
	if i < 0 {
		r.mu.Unlock()
		return ErrUnknownResource
	}
	s := r.held[i].s
	r.held[i].s = nil
	r.live--
	if r.live <= len(r.held)/2 {
		r.held = slices.DeleteFunc(r.held, func(e resource) bool { return e.s == nil })
	}
	if r.shared != nil {
		r.shared.give(1)
	}
	r.mu.Unlock()
	return s.Stop()
}

// Len returns how many resources are held.
func (r *Resources) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live
}

// StopAll stops every resource, newest first, and refuses later
// registrations. It is idempotent.
func (r *Resources) StopAll() {
	r.mu.Lock()
	r.stopped = true
	held := r.held
	r.held, r.live = nil, 0
	if r.shared != nil {
		n := 0
		for _, e := range held {
			if e.s != nil {
				n++
			}
		}
		r.shared.give(n)
	}
	r.mu.Unlock()
	for i := len(held) - 1; i >= 0; i-- {
		if s := held[i].s; s != nil {
			_ = s.Stop()
		}
	}
}
