package watcher

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// Kind names a kind of entity ("model", "machine", "application", ...).
type Kind string

// Change says that one entity of one model changed in a commit. Fields names
// the aspects that changed (for example "life", "created", "removed",
// "scale"); lifecycle and field-specific watchers filter on them. Parent,
// when set, names the entity of the same kind that the changed one belongs
// to (a container's host machine), so watchers of one parent's children are
// found through an index instead of being asked about every change of the
// kind.
type Change struct {
	Kind   Kind
	Model  string
	ID     string
	Parent string
	Fields []string
}

// Has reports whether the change touched field f.
func (c Change) Has(f string) bool { return slices.Contains(c.Fields, f) }

// ChangeSet is everything one commit changed, stamped with its revision.
type ChangeSet struct {
	Rev     uint64
	Changes []Change
}

// Field names shared by state and the watchers built on it.
const (
	FieldCreated = "created"
	FieldRemoved = "removed"
	FieldLife    = "life"
	// FieldReset marks the change Hub.Reset delivers: not one entity's
	// change but "anything the subscription selects may have changed".
	FieldReset = "reset"
)

// IsReset reports whether c is Hub.Reset's change rather than one
// entity's.
func (c Change) IsReset() bool { return len(c.Fields) == 1 && c.Fields[0] == FieldReset }

// ErrReset is what Next returns on a watcher that cannot say what a
// reset changed (a Strings watcher: which ids?): its client must watch
// again, reading a new initial snapshot. Juju's workers do exactly that
// when a watcher fails: they restart. It carries no error code.
var ErrReset = errors.New("watcher reset: the controller may have missed changes it was to report (its change feed fell behind the store); watch again")

// Filter selects changes: Kind and Model must match; ID matches any id when
// empty; Parent, when not empty, matches only changes with that Parent;
// Fields, when not empty, match a change that has any of them.
//
// A filter with an ID or a Parent costs a publish nothing unless the change
// has that id or parent (the hub indexes them); a filter with neither is
// asked about every change of its kind and model.
//
// AllModels matches changes of Kind in every model, whatever Model says
// (the controller's view of the models themselves: each model's changes
// carry its own UUID). Such a filter is asked about every change of its
// kind, so it is meant for rare kinds; its ID and Parent are matched per
// change, not indexed.
type Filter struct {
	Kind      Kind
	Model     string
	ID        string
	Parent    string
	Fields    []string
	AllModels bool
}

func (f Filter) match(c Change) bool {
	if f.ID != "" && f.ID != c.ID {
		return false
	}
	if f.Parent != "" && f.Parent != c.Parent {
		return false
	}
	if len(f.Fields) == 0 {
		return true
	}
	for _, want := range f.Fields {
		if c.Has(want) {
			return true
		}
	}
	return false
}

// Sink receives matching changes. It must not block and must not call back
// into the hub.
type Sink func(rev uint64, c Change)

type subKey struct {
	kind  Kind
	model string
}

// allModels is the model of the subKey of AllModels subscriptions (no
// model UUID starts with a NUL).
const allModels = "\x00all"

type subscription struct {
	filter Filter
	sink   Sink
}

// Hub fans committed changes out to subscriptions. The zero value is not
// usable; call NewHub. It is safe for concurrent use.
type Hub struct {
	count atomic.Int64

	mu     sync.RWMutex // guards the fields below
	nextID uint64
	// subs is indexed by (kind, model) and then by subscription id; the
	// per-id filtering is done per change. byID narrows further for
	// subscriptions on one entity so entity watchers stay cheap when many
	// watch the same kind; byParent likewise for subscriptions on one
	// parent's children (10,000 container watchers over 1,000 machines:
	// a new container reaches its host's watchers, not all 10,000).
	subs     map[subKey]map[uint64]*subscription
	byID     map[subKey]map[string]map[uint64]*subscription
	byParent map[subKey]map[string]map[uint64]*subscription
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{
		subs:     make(map[subKey]map[uint64]*subscription),
		byID:     make(map[subKey]map[string]map[uint64]*subscription),
		byParent: make(map[subKey]map[string]map[uint64]*subscription),
	}
}

// addKeyed adds s under (k, key) of index.
func addKeyed(index map[subKey]map[string]map[uint64]*subscription, k subKey, key string, id uint64, s *subscription) {
	keys := index[k]
	if keys == nil {
		keys = make(map[string]map[uint64]*subscription)
		index[k] = keys
	}
	m := keys[key]
	if m == nil {
		m = make(map[uint64]*subscription)
		keys[key] = m
	}
	m[id] = s
}

// removeKeyed removes subscription id from (k, key) of index, and the maps
// it leaves empty.
func removeKeyed(index map[subKey]map[string]map[uint64]*subscription, k subKey, key string, id uint64) {
	keys := index[k]
	delete(keys[key], id)
	if len(keys[key]) == 0 {
		delete(keys, key)
	}
	if len(keys) == 0 {
		delete(index, k)
	}
}

// addSub adds s under k of index.
func addSub(index map[subKey]map[uint64]*subscription, k subKey, id uint64, s *subscription) {
	m := index[k]
	if m == nil {
		m = make(map[uint64]*subscription)
		index[k] = m
	}
	m[id] = s
}

// removeSub removes subscription id from k of index, and the map it
// leaves empty.
func removeSub(index map[subKey]map[uint64]*subscription, k subKey, id uint64) {
	delete(index[k], id)
	if len(index[k]) == 0 {
		delete(index, k)
	}
}

// Subscribe registers sink for the changes matching f and returns the
// function that cancels the subscription. Cancel is idempotent; after it
// returns the sink is never called again.
func (h *Hub) Subscribe(f Filter, sink Sink) (cancel func()) {
	k := subKey{f.Kind, f.Model}
	if f.AllModels {
		k.model = allModels
	}
	s := &subscription{filter: f, sink: sink}
	h.mu.Lock()
	h.nextID++
	id := h.nextID
	switch {
	case f.AllModels:
		addSub(h.subs, k, id, s)
	case f.ID != "":
		addKeyed(h.byID, k, f.ID, id, s)
	case f.Parent != "":
		addKeyed(h.byParent, k, f.Parent, id, s)
	default:
		addSub(h.subs, k, id, s)
	}
	h.mu.Unlock()
	h.count.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			switch {
			case f.AllModels:
				removeSub(h.subs, k, id)
			case f.ID != "":
				removeKeyed(h.byID, k, f.ID, id)
			case f.Parent != "":
				removeKeyed(h.byParent, k, f.Parent, id)
			default:
				removeSub(h.subs, k, id)
			}
			h.mu.Unlock()
			h.count.Add(-1)
		})
	}
}

// Publish delivers cs to every matching subscription. Callers publish in
// commit order; Publish returns after every sink has returned.
func (h *Hub) Publish(cs ChangeSet) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, c := range cs.Changes {
		k := subKey{c.Kind, c.Model}
		for _, s := range h.subs[k] {
			if s.filter.match(c) {
				s.sink(cs.Rev, c)
			}
		}
		for _, s := range h.subs[subKey{c.Kind, allModels}] {
			if s.filter.match(c) {
				s.sink(cs.Rev, c)
			}
		}
		if ids := h.byID[k]; ids != nil {
			for _, s := range ids[c.ID] {
				if s.filter.match(c) {
					s.sink(cs.Rev, c)
				}
			}
		}
		if c.Parent == "" {
			continue
		}
		if parents := h.byParent[k]; parents != nil {
			for _, s := range parents[c.Parent] {
				if s.filter.match(c) {
					s.sink(cs.Rev, c)
				}
			}
		}
	}
}

// Reset tells every subscription that it may have missed changes up to
// rev (the store could not follow its change feed and reloaded its view
// at rev): each sink is called once with rev and a change of its filter's
// kind, model, id and parent whose only field is FieldReset (IsReset),
// whatever its filter's fields. A sink that cannot tell what changed
// wakes its watcher or fails it with ErrReset; a spurious event is
// allowed, a missed one never. Callers call Reset in revision order with
// Publish.
func (h *Hub) Reset(rev uint64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	each := func(s *subscription) {
		f := s.filter
		s.sink(rev, Change{Kind: f.Kind, Model: f.Model, ID: f.ID, Parent: f.Parent, Fields: []string{FieldReset}})
	}
	for _, m := range h.subs {
		for _, s := range m {
			each(s)
		}
	}
	for _, index := range []map[subKey]map[string]map[uint64]*subscription{h.byID, h.byParent} {
		for _, keys := range index {
			for _, m := range keys {
				for _, s := range m {
					each(s)
				}
			}
		}
	}
}

// Subscriptions returns the number of live subscriptions (for metrics).
func (h *Hub) Subscriptions() int { return int(h.count.Load()) }
