package facade

import (
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/watcher"
)

// NotifyResult registers w as a resource of the connection and returns
// the Watch* result. The watcher's first event is the Watch call itself
// (Juju's "consume the initial event"): the first Next waits for a later
// change. If registration fails, w is stopped and the error returned.
func (c *Context) NotifyResult(w *watcher.Notify) (params.NotifyWatchResult, error) {
	id, err := c.Resources.Register(w)
	if err != nil {
		return params.NotifyWatchResult{}, err
	}
	return params.NotifyWatchResult{NotifyWatcherId: id}, nil
}

// StringsResult registers w and returns the Watch* result carrying the
// initial ids inline.
func (c *Context) StringsResult(w *watcher.Strings, initial []string) (params.StringsWatchResult, error) {
	id, err := c.Resources.Register(w)
	if err != nil {
		return params.StringsWatchResult{}, err
	}
	return params.StringsWatchResult{StringsWatcherId: id, Changes: initial}, nil
}
