package modeladmin

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

func registerController(m *methods) {
	rpc.HandleNoArgs(m, "ControllerInfo", (*ModelAdmin).ControllerInfo)
}

// ControllerInfo describes the controller (provisionctl show-controller
// and version): its UUIDs, the API addresses it reports to agents, the
// Juju API level and the provisiond build serving it, how many models it
// holds and its store's figures, on either engine (state.InspectStore).
func (a *ModelAdmin) ControllerInfo(ctx context.Context) (params.ControllerInfo, error) {
	ctrl, err := a.st.Controller(ctx)
	if err != nil {
		return params.ControllerInfo{}, err
	}
	models, err := a.st.Models(ctx)
	if err != nil {
		return params.ControllerInfo{}, err
	}
	in, err := a.st.InspectStore(ctx)
	if err != nil {
		return params.ControllerInfo{}, err
	}
	bi := buildinfo.Get()
	out := params.ControllerInfo{
		ControllerUUID:      ctrl.UUID,
		ControllerModelUUID: ctrl.ModelUUID,
		APIAddresses:        []string{},
		APIVersion:          a.ctx.Deps.ServerVersion,
		Version:             bi.Version,
		Revision:            bi.Revision,
		GoVersion:           bi.GoVersion,
		Models:              len(models),
		Store: params.StoreInfo{Engine: in.Engine, SchemaVersion: in.SchemaVersion, Revision: in.Revision,
			SizeBytes: in.SizeBytes, InUseBytes: in.InUseBytes, QuotaBytes: in.QuotaBytes, CompactRevision: in.CompactRevision},
	}
	if f := a.ctx.Deps.History; f != nil {
		st, retention, err := f(ctx)
		if err != nil {
			return params.ControllerInfo{}, err
		}
		out.History = &params.HistoryInfo{Retention: retention, OldestRevision: st.Oldest, Records: st.Records, SizeBytes: st.Bytes}
		if !st.OldestTime.IsZero() {
			out.History.OldestTime = st.OldestTime.UTC().Format(time.RFC3339)
		}
	}
	for _, m := range in.Members {
		out.Store.Members = append(out.Store.Members, params.StoreMember{Endpoint: m.Endpoint, Up: m.Up, Error: m.Err,
			SizeBytes: m.SizeBytes, InUseBytes: m.InUseBytes, QuotaBytes: m.QuotaBytes, Alarms: m.Alarms})
	}
	if f := a.ctx.Deps.APIHostPorts; f != nil {
		for _, hps := range f() {
			for _, hp := range hps {
				out.APIAddresses = append(out.APIAddresses, net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port)))
			}
		}
	}
	return out, nil
}
