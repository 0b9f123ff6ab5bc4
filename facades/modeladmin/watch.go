package modeladmin

import (
	"context"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

func registerWatch(m *methods) {
	rpc.Handle(m, "WatchModel", (*ModelAdmin).WatchModel)
}

// WatchModel returns a StringsWatcher over every change committed to a
// model after the call: the model itself and every entity in it. Each
// change is reported as "<kind>/<id>" (for example "model/<uuid>",
// "machine/0", "machine/0/lxd/1"); kinds contain no "/". Changes between
// two Next calls coalesce: an entity changed several times is reported
// once. The initial changes are empty: it is a feed, not a set. The
// watcher keeps running after the model is removed (the removal is
// reported as "model/<uuid>"); stop it with StringsWatcher.Stop.
func (a *ModelAdmin) WatchModel(ctx context.Context, args params.ModelArgs) (params.StringsWatchResult, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.StringsWatchResult{}, err
	}
	w, initial, err := a.st.WatchModelChanges(ctx, m.UUID)
	if err != nil {
		return params.StringsWatchResult{}, err
	}
	return a.ctx.StringsResult(w, initial)
}
