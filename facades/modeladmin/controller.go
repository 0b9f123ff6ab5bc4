package modeladmin

import (
	"context"
	"net"
	"strconv"

	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

func registerController(m *methods) {
	rpc.HandleNoArgs(m, "ControllerInfo", (*ModelAdmin).ControllerInfo)
}

// StoreEngine names the database the state is kept in.
const StoreEngine = "bbolt"

// ControllerInfo describes the controller (provisionctl show-controller
// and version): its UUIDs, the API addresses it reports to agents, the
// Juju API level and the provisiond build serving it, how many models it
// holds and its store (engine, schema version, revision, file size).
func (a *ModelAdmin) ControllerInfo(context.Context) (params.ControllerInfo, error) {
	ctrl, err := a.st.Controller()
	if err != nil {
		return params.ControllerInfo{}, err
	}
	models, err := a.st.Models()
	if err != nil {
		return params.ControllerInfo{}, err
	}
	stats, err := a.st.Stats()
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
		Store: params.StoreInfo{Engine: StoreEngine, SchemaVersion: stats.SchemaVersion,
			Revision: stats.Revision, SizeBytes: stats.Size},
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
