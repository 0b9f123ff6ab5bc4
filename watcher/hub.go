package watcher

import (
	"errors"
	"hash/maphash"
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

// subKey is where a subscription is listed: its index (byKind, byID,
// byParent), its kind, its model (or allModels) and, in the byID and
// byParent indexes, its id or parent.
type subKey struct {
	ix    index
	kind  Kind
	model string
	key   string
}

// index is one of the hub's three indexes of subscriptions. byKind is
// indexed by (kind, model); the per-subscription filtering is done per
// change. byID narrows further for subscriptions on one entity so entity
// watchers stay cheap when many watch the same kind; byParent likewise
// for subscriptions on one parent's children (10,000 container watchers
// over 1,000 machines: a new container reaches its host's watchers, not
// all 10,000).
type index uint8

const (
	byKind index = iota
	byID
	byParent
)

// allModels is the model of the subKey of AllModels subscriptions (no
// model UUID starts with a NUL).
const allModels = "\x00all"

// subscription is one Subscribe: its filter and sink, and its place in the
// list of its index entry (each entry of an index is the head of a doubly
// linked list, so adding and cancelling cost O(1) and an entry with one
// subscription costs one map slot, not a map of its own).
type subscription struct {
	filter     Filter
	sink       Sink
	prev, next *subscription
	cancelled  bool // guarded by its shard's mu
}

// Hub fans committed changes out to subscriptions. The zero value is not
// usable; call NewHub. It is safe for concurrent use.
type Hub struct {
	count atomic.Int64

	// The subscriptions, by subKey, in hubShards shards, each with its
	// own lock: a subscription is added and cancelled under its shard's
	// lock alone, and Publish and Reset hold every shard's read lock. So
	// when thousands of connections end at once (a daemon's stop, each
	// connection's teardown cancelling its watchers) their cancels queue
	// on 64 locks instead of one: on one lock 14,000 connections' cancels
	// held a loaded daemon's stop past its budget (docs/performance.md,
	// "Scale").
	seed   maphash.Seed
	shards [hubShards]hubShard
	// retired: cancelling a subscription does nothing (Retire).
	retired atomic.Bool

	pmu        sync.Mutex    // guards the fields below (not a shard's lock: Sync must not wait for subscribers)
	publishing int           // Publish and Reset calls under way
	begun      uint64        // the revision of the latest Publish or Reset begun
	synced     chan struct{} // made by Sync during them; closed when the last ends
}

// hubShards is how many shards a Hub's subscriptions are in.
const hubShards = 64

// hubShard is one shard of a Hub's subscriptions: each entry is the
// newest subscription of its list. Padded to its own cache lines.
type hubShard struct {
	mu   sync.RWMutex // guards subs and its subscriptions' links
	subs map[subKey]*subscription
	_    [64 - 32]byte
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	h := &Hub{seed: maphash.MakeSeed()}
	for i := range h.shards {
		h.shards[i].subs = make(map[subKey]*subscription)
	}
	return h
}

// keyOf returns the key f's subscriptions are listed under.
func keyOf(f *Filter) subKey {
	switch {
	case f.AllModels:
		return subKey{byKind, f.Kind, allModels, ""}
	case f.ID != "":
		return subKey{byID, f.Kind, f.Model, f.ID}
	case f.Parent != "":
		return subKey{byParent, f.Kind, f.Model, f.Parent}
	}
	return subKey{byKind, f.Kind, f.Model, ""}
}

// shard returns the shard key k is in: by its id or parent (which spread
// an index's lists over the shards), else by its model.
func (h *Hub) shard(k subKey) *hubShard {
	s := k.key
	if s == "" {
		s = k.model
	}
	return &h.shards[maphash.String(h.seed, s)%hubShards]
}

// Subscribe registers sink for the changes matching f and returns the
// function that cancels the subscription. Cancel is idempotent; after it
// returns the sink is never called again.
func (h *Hub) Subscribe(f Filter, sink Sink) (cancel func()) {
	s := &subscription{filter: f, sink: sink}
	k := keyOf(&s.filter)
	sh := h.shard(k)
	sh.mu.Lock()
	if head := sh.subs[k]; head != nil {
		head.prev = s
		s.next = head
	}
	sh.subs[k] = s
	sh.mu.Unlock()
	h.count.Add(1)
	return func() { h.cancel(s) }
}

// cancel unlinks s from its list, once.
func (h *Hub) cancel(s *subscription) {
	if h.retired.Load() {
		return
	}
	k := keyOf(&s.filter)
	sh := h.shard(k)
	sh.mu.Lock()
	if s.cancelled {
		sh.mu.Unlock()
		return
	}
	s.cancelled = true
	switch {
	case s.prev != nil:
		s.prev.next = s.next
	case s.next != nil:
		sh.subs[k] = s.next
	default:
		delete(sh.subs, k)
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	sh.mu.Unlock()
	h.count.Add(-1)
}

// Retire makes cancelling a subscription do nothing from now on: the
// subscriptions stay, and a publish still reaches them (a stopped
// watcher's sink ignores it). A stopping daemon retires its hub as its
// connections end: their thousands of watchers stop at once, and their
// cancels queued on the shards' locks held a daemon's stop past its
// budget at 100,000 agents, for subscriptions the process's end drops.
func (h *Hub) Retire() { h.retired.Store(true) }

// Publish delivers cs to every matching subscription. Callers publish in
// commit order; Publish returns after every sink has returned.
func (h *Hub) Publish(cs ChangeSet) {
	h.beginPublish(cs.Rev)
	defer h.endPublish()
	deliver := func(k subKey, c Change) {
		sh := h.shard(k)
		sh.mu.RLock()
		defer sh.mu.RUnlock()
		for s := sh.subs[k]; s != nil; s = s.next {
			if s.filter.match(c) {
				s.sink(cs.Rev, c)
			}
		}
	}
	for _, c := range cs.Changes {
		deliver(subKey{byKind, c.Kind, c.Model, ""}, c)
		deliver(subKey{byKind, c.Kind, allModels, ""}, c)
		if c.ID != "" {
			deliver(subKey{byID, c.Kind, c.Model, c.ID}, c)
		}
		if c.Parent != "" {
			deliver(subKey{byParent, c.Kind, c.Model, c.Parent}, c)
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
	h.beginPublish(rev)
	defer h.endPublish()
	for i := range h.shards {
		sh := &h.shards[i]
		sh.mu.RLock()
		for _, head := range sh.subs {
			for s := head; s != nil; s = s.next {
				f := &s.filter
				s.sink(rev, Change{Kind: f.Kind, Model: f.Model, ID: f.ID, Parent: f.Parent, Fields: []string{FieldReset}})
			}
		}
		sh.mu.RUnlock()
	}
}

// Sync returns once the Publish and Reset calls under way when it was
// called have returned (at once if none is): what their sinks did, and
// what the sinks handed on, is then whole. A consumer of what sinks hand
// on (a connection writing the replies that one commit's sinks gave it)
// calls it to take a commit's deliveries together. It must not be called
// from a sink.
func (h *Hub) Sync() {
	h.pmu.Lock()
	if h.publishing == 0 {
		h.pmu.Unlock()
		return
	}
	if h.synced == nil {
		h.synced = make(chan struct{})
	}
	ch := h.synced
	h.pmu.Unlock()
	<-ch
}

// beginPublish and endPublish bracket a Publish or Reset for Sync.
func (h *Hub) beginPublish(rev uint64) {
	h.pmu.Lock()
	h.publishing++
	h.begun = max(h.begun, rev)
	h.pmu.Unlock()
}

func (h *Hub) endPublish() {
	h.pmu.Lock()
	h.publishing--
	if h.publishing == 0 && h.synced != nil {
		close(h.synced)
		h.synced = nil
	}
	h.pmu.Unlock()
}

// Begun returns the revision of the latest Publish or Reset begun (0:
// none yet): every change a sink has been given is of it or older, and
// its sinks may not all have been called yet.
func (h *Hub) Begun() uint64 {
	h.pmu.Lock()
	defer h.pmu.Unlock()
	return h.begun
}

// Subscriptions returns the number of live subscriptions (for metrics).
func (h *Hub) Subscriptions() int { return int(h.count.Load()) }
