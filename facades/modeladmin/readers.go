package modeladmin

import (
	"context"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// StatusOf is what Status reports of model m, for readers in the daemon's
// own process that are not API clients (the dashboard): the same view as
// provisionctl status, read from st, with the agents' presence from pr
// (nil: not shown). It only reads.
func StatusOf(ctx context.Context, st *state.State, pr *presence.Recorder, m state.Model) (params.ModelStatus, error) {
	return (&ModelAdmin{st: st, presence: pr}).modelStatus(ctx, m)
}

// StoragePoolsOf is what StoragePools reports of model m; see StatusOf.
func StoragePoolsOf(ctx context.Context, st *state.State, m state.Model) ([]params.StoragePoolInfo, error) {
	res, err := (&ModelAdmin{st: st}).storagePools(ctx, m)
	return res.Pools, err
}

// HistoryOf is what History returns for args (a model named by its UUID
// or name, never ""), read from st; see StatusOf. OldestRevision is left
// 0.
func HistoryOf(ctx context.Context, st *state.State, args params.HistoryArgs) (params.HistoryResult, error) {
	return (&ModelAdmin{st: st, ctx: &facade.Context{Deps: &facade.Deps{}, Model: &state.Model{}}}).History(ctx, args)
}
