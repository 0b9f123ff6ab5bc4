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
// its maximum number of resources.
type TooManyError struct{ Max int }

func (e *TooManyError) Error() string {
	return fmt.Sprintf("too many watchers on this connection (limit %d)", e.Max)
}

// Resources is one connection's registry of resources, with ids "1", "2",
// ... that are never reused. It is safe for concurrent use.
type Resources struct {
	max int

	mu      sync.Mutex // guards the fields below
	next    uint64
	m       map[string]Stopper
	stopped bool
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
	r.mu.Unlock()
	for _, s := range all {
		_ = s.Stop()
	}
}
