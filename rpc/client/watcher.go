package client

import (
	"context"
	"errors"

	"github.com/provisiond/provisiond/rpc/params"
)

// NotifyWatcher drives a server-side notify watcher (facade NotifyWatcher
// v1) by id. It is safe for concurrent use.
type NotifyWatcher struct {
	c  *Conn
	id string
}

// NewNotifyWatcher returns a client for the notify watcher with id on c.
func NewNotifyWatcher(c *Conn, id string) *NotifyWatcher { return &NotifyWatcher{c: c, id: id} }

// ID returns the watcher id.
func (w *NotifyWatcher) ID() string { return w.id }

// Next blocks until the watcher reports a change. After the watcher is
// stopped it fails with code "stopped" or "not found".
func (w *NotifyWatcher) Next(ctx context.Context) error {
	return w.c.Call(ctx, "NotifyWatcher", 1, w.id, "Next", nil, nil)
}

// NextRevision is Next with provisiond's "from-revision" header key
// (Conn.CallFrom): it also returns the revision up to which this event and
// the earlier ones cover every change (0: the watcher reports none).
func (w *NotifyWatcher) NextRevision(ctx context.Context) (uint64, error) {
	return w.c.CallFrom(ctx, "NotifyWatcher", 1, w.id, "Next", 0, nil, nil)
}

// Stop stops the watcher on the server.
func (w *NotifyWatcher) Stop(ctx context.Context) error {
	return w.c.Call(ctx, "NotifyWatcher", 1, w.id, "Stop", nil, nil)
}

// StringsWatcher drives a server-side strings watcher (facade
// StringsWatcher v1) by id. It is safe for concurrent use.
type StringsWatcher struct {
	c  *Conn
	id string
}

// NewStringsWatcher returns a client for the strings watcher with id on c.
func NewStringsWatcher(c *Conn, id string) *StringsWatcher { return &StringsWatcher{c: c, id: id} }

// ID returns the watcher id.
func (w *StringsWatcher) ID() string { return w.id }

// Next blocks until the watcher reports changes and returns them.
func (w *StringsWatcher) Next(ctx context.Context) ([]string, error) {
	var res params.StringsWatchResult
	if err := w.c.Call(ctx, "StringsWatcher", 1, w.id, "Next", nil, &res); err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, res.Error
	}
	return res.Changes, nil
}

// NextRevision is Next with provisiond's "from-revision" header key
// (Conn.CallFrom): it also returns the revision up to which this event and
// the earlier ones cover every change (0: the watcher reports none).
func (w *StringsWatcher) NextRevision(ctx context.Context) ([]string, uint64, error) {
	var res params.StringsWatchResult
	rev, err := w.c.CallFrom(ctx, "StringsWatcher", 1, w.id, "Next", 0, nil, &res)
	if err != nil {
		return nil, 0, err
	}
	if res.Error != nil {
		return nil, 0, res.Error
	}
	return res.Changes, rev, nil
}

// GoNext starts a Next without waiting for it (see Conn.Go): done gets
// what Next would have returned, from the connection's reader goroutine.
func (w *StringsWatcher) GoNext(done func([]string, error)) {
	var res params.StringsWatchResult
	w.c.Go("StringsWatcher", 1, w.id, "Next", nil, &res, func(err error) {
		switch {
		case err != nil:
			done(nil, err)
		case res.Error != nil:
			done(nil, res.Error)
		default:
			done(res.Changes, nil)
		}
	})
}

// GoNextRevision is GoNext with provisiond's "from-revision" header key
// (NextRevision): done also gets the revision up to which this event and
// the earlier ones cover every change.
func (w *StringsWatcher) GoNextRevision(done func([]string, uint64, error)) {
	var res params.StringsWatchResult
	w.c.GoFrom("StringsWatcher", 1, w.id, "Next", 0, nil, &res, func(rev uint64, err error) {
		switch {
		case err != nil:
			done(nil, 0, err)
		case res.Error != nil:
			done(nil, 0, res.Error)
		default:
			done(res.Changes, rev, nil)
		}
	})
}

// Stop stops the watcher on the server.
func (w *StringsWatcher) Stop(ctx context.Context) error {
	return w.c.Call(ctx, "StringsWatcher", 1, w.id, "Stop", nil, nil)
}

// IsCode reports whether err is, or wraps, a *params.Error with the given
// code. It is false for a nil err.
func IsCode(err error, code string) bool {
	var pe *params.Error
	return errors.As(err, &pe) && pe.Code == code
}
