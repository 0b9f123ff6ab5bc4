package rpc

import (
	"context"
	"sync/atomic"
)

// Revisions on the wire: provisiond's own clients (rpc/client, the
// reference agent, provisionctl) may add the header key "from-revision"
// to a request, which Juju's clients never send and Juju's server does
// not know. A Watch call with it opens its watcher resumed after that
// revision (0: a fresh watch), where the watcher can be; the reply to a
// call with it carries "revision", the store revision up to which the
// watcher's events so far cover every change (a Watch call's: its
// initial event; a Next call's: this event). A call without the key is
// answered exactly as before, so Juju's bytes are unchanged. The facades
// read the key with FromRevision and set the reply's revision with
// SetRevision.

// callRevision is the from-revision of a call's request and the revision
// its reply carries.
type callRevision struct {
	from uint64
	rev  atomic.Uint64
}

// revision is the revision the reply carries (0: none).
func (cc *callCtx) revision() uint64 {
	if cc.rev == nil {
		return 0
	}
	return cc.rev.rev.Load()
}

// FromRevision returns the from-revision the request of the call running
// with ctx named, and whether it named one.
func FromRevision(ctx context.Context) (uint64, bool) {
	cc, _ := ctx.Value(callKey{}).(*callCtx)
	if cc == nil || cc.rev == nil {
		return 0, false
	}
	return cc.rev.from, true
}

// SetRevision sets the revision the reply of the call running with ctx
// carries. It does nothing for a call whose request named no
// from-revision. A method that replies later (HandleLater) sets it before
// it calls its reply function. Set more than once (a bulk Watch call
// makes a watcher per item, each covering up to its own snapshot's
// revision), the reply carries the lowest: every change up to it is in
// every watcher's events, so a client resuming all of them from it misses
// none.
func SetRevision(ctx context.Context, rev uint64) {
	cc, _ := ctx.Value(callKey{}).(*callCtx)
	if cc == nil || cc.rev == nil || rev == 0 {
		return
	}
	for {
		cur := cc.rev.rev.Load()
		if cur != 0 && cur <= rev || cc.rev.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}
