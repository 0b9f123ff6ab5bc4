// Package watchers serves the NotifyWatcher and StringsWatcher facades,
// version 1: Next and Stop on a watcher that a Watch* call registered as a
// resource of the same connection, named by the request's "id".
//
// Next replies once the watcher has a change since the previous Next (or
// since the Watch call, which consumed the first event), the watcher is
// stopped (code "stopped"), or the connection ends (the error table makes
// that "stopped" too: the watcher is being stopped with the connection). A waiting Next holds
// no goroutine: it is registered with rpc.HandleLater and the watcher
// completes it from the goroutine that publishes the change (the hub's
// publisher, a timer) through watcher NextAsync.
package watchers

import (
	"context"
	"slices"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/watcher"
)

// NotifyWatcher is the facade instance of one call on a notify watcher.
type NotifyWatcher struct {
	ctx *facade.Context
	w   *watcher.Notify
}

// StringsWatcher is the facade instance of one call on a strings watcher.
type StringsWatcher struct {
	ctx *facade.Context
	w   *watcher.Strings
}

// Register adds NotifyWatcher v1 and StringsWatcher v1 to r.
func Register(r *facade.Registry) {
	rpc.Register(r, "NotifyWatcher", 1, newNotify, func(m *rpc.Methods[*facade.Context, *NotifyWatcher]) {
		rpc.HandleLaterNone(m, "Next", (*NotifyWatcher).Next)
		rpc.HandleNone(m, "Stop", (*NotifyWatcher).Stop)
	})
	rpc.Register(r, "StringsWatcher", 1, newStrings, func(m *rpc.Methods[*facade.Context, *StringsWatcher]) {
		rpc.HandleLaterAs(m, "Next", (*StringsWatcher).Next, stringsResult)
		rpc.HandleNone(m, "Stop", (*StringsWatcher).Stop)
	})
}

func allowed(c *facade.Context) error {
	if !c.Auth.IsUser() && !c.Auth.IsMachineAgent() {
		return facade.ErrPerm
	}
	return nil
}

func newNotify(c *facade.Context) (*NotifyWatcher, error) {
	if err := allowed(c); err != nil {
		return nil, err
	}
	r, err := c.Resources.Get(c.ID)
	if err != nil {
		return nil, facade.ErrUnknownWatcher
	}
	w, ok := r.(*watcher.Notify)
	if !ok {
		return nil, facade.ErrUnknownWatcher
	}
	return &NotifyWatcher{ctx: c, w: w}, nil
}

func newStrings(c *facade.Context) (*StringsWatcher, error) {
	if err := allowed(c); err != nil {
		return nil, err
	}
	r, err := c.Resources.Get(c.ID)
	if err != nil {
		return nil, facade.ErrUnknownWatcher
	}
	w, ok := r.(*watcher.Strings)
	if !ok {
		return nil, facade.ErrUnknownWatcher
	}
	return &StringsWatcher{ctx: c, w: w}, nil
}

// Next replies with the next change. A Next that waits holds its reply
// function and nothing of the call's facade instance or Context. The
// call's context is not handed to
// the watcher: its only end is the connection's, and the connection's end
// stops the watcher (Session.Kill stops every resource), which replies
// "stopped" as the context's end would. A context that never ends costs
// the waiting call nothing (no context callback, no reference to the
// call's state). The reply is given on the goroutine that completes the
// call (the hub's publisher, a timer); the connection's writer encodes and
// writes it, with whatever else is queued by then (the other watchers of
// the connection that the same commit wakes).
//
// A call with provisiond's "from-revision" header key on a watcher that
// reports revisions gets the revision its event covers, as
// StringsWatcher.Next's; a change pending by then is of that revision or
// an older one, so it is taken with the event.
func (n *NotifyWatcher) Next(ctx context.Context, reply func(error)) {
	_, revs := rpc.FromRevision(ctx)
	if !revs || !n.w.Revisioned() {
		n.w.NextAsync(context.Background(), reply)
		return
	}
	n.w.NextAsync(context.Background(), func(err error) {
		if err != nil {
			reply(err)
			return
		}
		covered(ctx, n.ctx, reply, func(rev uint64) {
			n.w.TakePending()
			rpc.SetRevision(ctx, rev)
			reply(nil)
		})
	})
}

// covered calls finish, once the event a Next has just taken is complete,
// with the revision it covers: it waits until the revision the hub began
// publishing last is applied (the event's changes are of it or older; the
// rest of its changes may not have reached the watcher yet), then reads
// the revision applied: everything up to it had reached the watcher
// before. fail gets the error of a wait that ends with the connection.
func covered(ctx context.Context, c *facade.Context, fail func(error), finish func(rev uint64)) {
	st := c.Deps.State
	n := c.Deps.Hub.Begun()
	if n <= st.Revision() {
		finish(st.Revision())
		return
	}
	// Perhaps on the publisher's goroutine, which must not wait for its
	// own revision: a goroutine owned by this call, which ends once n is
	// applied, or with the connection.
	go func() {
		if err := st.WaitApplied(ctx, n); err != nil {
			fail(err)
			return
		}
		finish(st.Revision())
	}()
}

// Stop stops the watcher and forgets its id.
func (n *NotifyWatcher) Stop(context.Context) error {
	return n.ctx.Resources.Stop(n.ctx.ID)
}

// Next replies with the next changed ids; see NotifyWatcher.Next for its
// context.
//
// A call with provisiond's "from-revision" header key (rpc.FromRevision)
// on a watcher that reports revisions (watcher.Strings.Revisioned) gets
// the revision its event covers: every change up to it is in this event
// or an earlier one, and none after it is. Once the event is taken, the
// reply waits until its revision is complete (covered), then takes what
// is pending with the event: everything up to that revision had reached
// the watcher before.
//
// reply takes the ids of the result (stringsResult makes it): without a
// revision to wait for, it is the watcher's own callback, and a waiting
// Next makes no function of its own.
func (s *StringsWatcher) Next(ctx context.Context, reply func([]string, error)) {
	if _, revs := rpc.FromRevision(ctx); !revs || !s.w.Revisioned() {
		s.w.NextAsync(context.Background(), reply)
		return
	}
	s.w.NextAsync(context.Background(), func(ids []string, err error) {
		if err != nil {
			reply(nil, err)
			return
		}
		covered(ctx, s.ctx, func(err error) { reply(nil, err) }, func(rev uint64) {
			more := s.w.TakePending()
			rpc.SetRevision(ctx, rev)
			reply(mergeIDs(ids, more), nil)
		})
	})
}

// stringsResult is a StringsWatcher.Next's result: the changed ids.
func stringsResult(ids []string) params.StringsWatchResult {
	return params.StringsWatchResult{Changes: ids}
}

// mergeIDs returns the sorted union of two sorted lists of ids.
func mergeIDs(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Stop stops the watcher and forgets its id.
func (s *StringsWatcher) Stop(context.Context) error {
	return s.ctx.Resources.Stop(s.ctx.ID)
}
