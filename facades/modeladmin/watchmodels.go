package modeladmin

import (
	"context"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

func registerWatchModels(m *methods) {
	rpc.HandleNoArgs(m, "WatchModels", (*ModelAdmin).WatchModels)
}

// WatchModels returns a StringsWatcher over the lifecycle of the
// controller's models, ids being model UUIDs: the initial changes are
// every model; later, models added, made dying or removed (state.WatchModels).
// It is how an agent that works for every model (provisionagent) follows
// them; ListModels says what each UUID is.
func (a *ModelAdmin) WatchModels(ctx context.Context) (params.StringsWatchResult, error) {
	w, initial, err := a.st.WatchModels(ctx)
	if err != nil {
		return params.StringsWatchResult{}, err
	}
	return a.ctx.StringsResult(w, initial)
}
