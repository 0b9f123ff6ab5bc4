package dashboard

import (
	"slices"
	"sync"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// feedSize is how many of a model's last changes the feed keeps.
const feedSize = 100

// change is one entry of a model's activity feed.
type change struct {
	Seq  uint64    `json:"seq"` // the feed's own order, per model
	Time time.Time `json:"time"`
	Rev  uint64    `json:"rev"`
	Kind string    `json:"kind"`
	ID   string    `json:"id"`
	// Name is the model's name when ID is a model's UUID (the model's own
	// changes, its constraints): set as a stream sends the change.
	Name   string   `json:"name,omitempty"`
	Fields []string `json:"fields,omitempty"`
}

// ring is the last feedSize changes of one model, a circular buffer (no
// copying on the publisher's path).
type ring struct {
	entries [feedSize]change
	n       int    // entries held, at most feedSize
	seq     uint64 // of the last entry
}

func (r *ring) add(c change) {
	r.seq++
	c.Seq = r.seq
	r.entries[(r.seq-1)%feedSize] = c
	r.n = min(r.n+1, feedSize)
}

// after returns the entries after seq, oldest first.
func (r *ring) after(seq uint64) []change {
	first := r.seq - uint64(r.n) + 1 // seq of the oldest entry held
	from := max(seq+1, first)
	out := make([]change, 0, r.seq+1-min(from, r.seq+1))
	for s := from; s <= r.seq; s++ {
		out = append(out, r.entries[(s-1)%feedSize])
	}
	return out
}

// listener is a stream's wake-up: signalled (without blocking) when its
// model changes or the model list does.
type listener struct {
	model  string
	wake   chan struct{} // capacity 1
	models bool          // the model list changed; guarded by feed.mu
	// presence: an agent of the model went alive or down; guarded by
	// feed.mu.
	presence bool
}

func (l *listener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// feed follows every model's changes through the hub: one subscription per
// model kind (Filter.AllModels), whose sink appends to the model's ring and
// wakes the model's listeners; and one to the users, whose password
// changes and removals end their sessions.
type feed struct {
	now     func() time.Time
	cancels []func()

	mu        sync.Mutex
	rings     map[string]*ring
	listeners map[*listener]struct{}
}

// feedKinds are the kinds the feed follows: the model records and every
// per-model kind.
func feedKinds() []watcher.Kind {
	return slices.Concat([]watcher.Kind{state.KindModel}, state.ModelKinds, state.ModelRecordKinds)
}

func newFeed(hub *watcher.Hub, now func() time.Time, userChanged func(name string)) *feed {
	f := &feed{now: now, rings: map[string]*ring{}, listeners: map[*listener]struct{}{}}
	for _, k := range feedKinds() {
		f.cancels = append(f.cancels, hub.Subscribe(watcher.Filter{Kind: k, AllModels: true}, f.sink))
	}
	f.cancels = append(f.cancels, hub.Subscribe(watcher.Filter{
		Kind: state.KindUser, Fields: []string{state.FieldPassword, watcher.FieldRemoved},
	}, func(_ uint64, c watcher.Change) {
		if c.IsReset() {
			userChanged("") // a password change may have been missed: every user's sessions end
			return
		}
		userChanged(c.ID)
	}))
	return f
}

// sink records c. It runs on the hub's publisher, so it only takes f.mu.
func (f *feed) sink(rev uint64, c watcher.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.IsReset() {
		// The store's feed was reset (watcher.Hub.Reset): changes were
		// missed. No entry says what they were; every stream reads its
		// page and the model list again.
		for l := range f.listeners {
			l.models = true
			l.signal()
		}
		return
	}
	r := f.rings[c.Model]
	if r == nil {
		r = &ring{}
		f.rings[c.Model] = r
	}
	r.add(change{Time: f.now(), Rev: rev, Kind: string(c.Kind), ID: c.ID, Fields: slices.Clone(c.Fields)})
	isModel := c.Kind == state.KindModel
	for l := range f.listeners {
		switch {
		case isModel:
			l.models = true
			l.signal()
		case l.model == c.Model:
			l.signal()
		}
	}
	if isModel && c.Has(watcher.FieldRemoved) {
		delete(f.rings, c.Model) // a removed model's ring goes with it
	}
}

// presenceChanged wakes the streams of model: an agent of it went alive
// or down (Config.OnPresence). It runs on the goroutine that saw the
// change, so it only takes f.mu.
func (f *feed) presenceChanged(model string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.listeners {
		if l.model == model {
			l.presence = true
			l.signal()
		}
	}
}

// takePresence returns, and clears, l's presence flag.
func (f *feed) takePresence(l *listener) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := l.presence
	l.presence = false
	return p
}

// listen registers a listener for model's changes; cancel removes it.
func (f *feed) listen(model string) (l *listener, cancel func()) {
	l = &listener{model: model, wake: make(chan struct{}, 1)}
	f.mu.Lock()
	f.listeners[l] = struct{}{}
	f.mu.Unlock()
	return l, func() {
		f.mu.Lock()
		delete(f.listeners, l)
		f.mu.Unlock()
	}
}

// since returns model's changes after seq (oldest first), the sequence
// number to ask from next time, and whether changes were lost between
// (more than feedSize since seq). A seq of 0 returns the whole ring. It
// also returns, and clears, l's model-list flag.
func (f *feed) since(l *listener, seq uint64) (out []change, next uint64, lost, models bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	models, l.models = l.models, false
	r := f.rings[l.model]
	if r == nil {
		return nil, seq, false, models
	}
	if seq > r.seq { // the ring started over (the model was removed)
		seq = 0
	}
	out = r.after(seq)
	lost = seq != 0 && len(out) > 0 && out[0].Seq > seq+1
	return out, r.seq, lost, models
}

// close cancels the hub subscriptions.
func (f *feed) close() {
	for _, c := range f.cancels {
		c()
	}
}
