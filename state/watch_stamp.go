package state

import (
	"context"
	"sync"

	"github.com/provisiond/provisiond/watcher"
)

// A Watch method subscribes first and reads its initial snapshot second, so
// that a change committed in between is never missed. Without more, such a
// change reaches the new watcher although the snapshot already holds it: a
// spurious wake-up (the agent's Next returns and it reads nothing new). So
// each watcher is stamped with the revision of its snapshot's view, and its
// sink ignores every change at or below it: those are in the snapshot.
// Changes that arrive before the snapshot has been read are held until the
// stamp is known, then passed on or dropped.
//
// A reset (the store could not follow its feed: watcher.Hub.Reset) is
// stamped like a change: a watcher whose snapshot is at or after the
// reset's revision missed nothing. Otherwise it does not reach the
// watcher's own sink, which expects one entity's change, but resets the
// watcher (watcher.Resetter: a notify watcher triggers, a strings
// watcher fails with watcher.ErrReset and its client watches again).

// stamper is the sink of a stamped subscription: every watcher holds one
// (64 bytes: what only the moment before the stamp needs is a pointer).
type stamper struct {
	sink  watcher.Sink
	reset interface{ Reset() } // the watcher itself: no closure per watcher

	mu    sync.Mutex // guards the fields below; held while sink runs, so delivery stays in order
	set   bool
	rev   uint64           // the snapshot's revision, once set
	early *[]stampedChange // changes that came before the stamp; nil for none
}

type stampedChange struct {
	rev uint64
	c   watcher.Change
}

// stamp wraps sink: nothing reaches it until Stamp, and then only changes
// after the stamped revision; a reset after it calls reset's Reset
// instead.
func stamp(sink watcher.Sink, reset interface{ Reset() }) *stamper {
	return &stamper{sink: sink, reset: reset}
}

// deliver passes c on to the sink, or a reset to reset; s.mu is held.
func (s *stamper) deliver(rev uint64, c watcher.Change) {
	if c.IsReset() {
		s.reset.Reset()
		return
	}
	s.sink(rev, c)
}

// Sink is the hub's sink of the subscription.
func (s *stamper) Sink(rev uint64, c watcher.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.set {
		if s.early == nil {
			s.early = new([]stampedChange)
		}
		*s.early = append(*s.early, stampedChange{rev, c})
		return
	}
	if rev > s.rev {
		s.deliver(rev, c)
	}
}

// Stamp sets the snapshot's revision and passes on what came before it and
// is newer.
func (s *stamper) Stamp(rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev, s.set = rev, true
	if s.early != nil {
		for _, e := range *s.early {
			if e.rev > rev {
				s.deliver(e.rev, e.c)
			}
		}
	}
	s.early = nil
}

// subscribeStamped subscribes sink to every filter of fs through one
// stamper, stopped with w and reset through it.
func (st *State) subscribeStamped(w watcher.Resetter, sink watcher.Sink, fs ...watcher.Filter) *stamper {
	s := stamp(sink, w)
	for _, f := range fs {
		w.OnStop(st.hub.Subscribe(f, s.Sink))
	}
	return s
}

// stamped is the revision s was stamped with (0 before Stamp).
func (s *stamper) stamped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// stampNow stamps a watcher that reads no snapshot itself (its caller
// reads after the Watch call returns) with the revision this process has
// applied: whatever is at or below it, any later read sees.
func (st *State) stampNow(ctx context.Context, s *stamper) {
	st.beforeSnapshot(ctx)
	s.Stamp(st.store.Revision())
}

// viewStamped reads a watcher's snapshot in one view and stamps s with the
// view's revision. beforeSnapshot runs first: the moment between a
// watcher's subscription and its snapshot.
func (st *State) viewStamped(ctx context.Context, s *stamper, fn func(r reader) error) error {
	st.beforeSnapshot(ctx)
	var rev uint64
	err := st.view(ctx, func(r reader) error {
		rev = r.Revision()
		return fn(r)
	})
	if err == nil {
		s.Stamp(rev)
	}
	return err
}
