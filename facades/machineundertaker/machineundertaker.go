// Package machineundertaker serves Juju's MachineUndertaker facade,
// version 1: what a controller agent running Juju's own
// worker/machineundertaker calls to list a model's machines marked for
// removal, read their interfaces at the provider, release them there and
// complete their removal. The facade is not in the Juju 3.3 schema; its
// methods, rules and wire shapes are those of Juju's
// apiserver/facades/controller/machineundertaker and rpc/params at the
// commit the project follows.
//
// Only the controller agent may use it (Juju's AuthController), on an IAAS
// model endpoint (Juju does not serve it on container models); the model
// tags of AllMachineRemovals and WatchMachineRemovals must name the
// connection's model (permission denied otherwise).
//
// The controller completes removals itself too (its built-in undertaker,
// docs/provisioner.md): CompleteMachineRemovals is idempotent, as Juju's
// (a machine already removed is skipped), so an external undertaker that
// comes second gets no error. With controller config machine-undertaker
// set to "external" the built-in one leaves removals to the external one.
package machineundertaker

import (
	"context"
	"fmt"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Name is the facade's name.
const Name = "MachineUndertaker"

// API is the facade instance of one call.
type API struct {
	ctx   *facade.Context
	st    *state.State
	model string
	env   *environ.Provider
}

// Register adds MachineUndertaker v1 to r.
func Register(r *facade.Registry) {
	rpc.Register(r, Name, 1, New, func(m *rpc.Methods[*facade.Context, *API]) {
		rpc.Handle(m, "AllMachineRemovals", (*API).AllMachineRemovals)
		rpc.HandleNoResult(m, "CompleteMachineRemovals", (*API).CompleteMachineRemovals)
		rpc.Handle(m, "GetMachineProviderInterfaceInfo", (*API).GetMachineProviderInterfaceInfo)
		rpc.Handle(m, "WatchMachineRemovals", (*API).WatchMachineRemovals)
	})
}

// New refuses everyone but the controller agent, and container models.
func New(c *facade.Context) (*API, error) {
	if err := c.RequireController(); err != nil {
		return nil, err
	}
	if c.Model.Type != state.ModelTypeIAAS {
		return nil, errors.NewNotSupported(nil, fmt.Sprintf("facade %q not supported on container models", Name))
	}
	return &API{ctx: c, st: c.Deps.State, model: c.Model.UUID, env: c.Deps.Environ}, nil
}

// AllMachineRemovals returns, for each model tag, the machines of the model
// marked for removal (null when there are none, as Juju's).
func (a *API) AllMachineRemovals(ctx context.Context, args params.Entities) (params.EntitiesResults, error) {
	return params.EntitiesResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.EntitiesResult, error) {
		if err := a.checkModel(e.Tag); err != nil {
			return params.EntitiesResult{}, err
		}
		ids, err := a.st.MachineRemovals(ctx, a.model)
		if err != nil {
			return params.EntitiesResult{}, err
		}
		var out []params.Entity
		for _, id := range ids {
			out = append(out, params.Entity{Tag: state.Machine{ID: id}.Tag().String()})
		}
		return params.EntitiesResult{Entities: out}, nil
	})}, nil
}

// GetMachineProviderInterfaceInfo returns each machine's network
// interfaces as the provider knows them (its link-layer devices: name,
// MAC address, provider id); each result names the machine tag asked
// about, also when it fails.
func (a *API) GetMachineProviderInterfaceInfo(ctx context.Context, args params.Entities) (params.ProviderInterfaceInfoResults, error) {
	res := facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.ProviderInterfaceInfoResult, error) {
		t, err := facade.ParseMachineTag(e.Tag)
		if err != nil {
			return params.ProviderInterfaceInfoResult{}, err
		}
		m, err := a.st.Machine(ctx, a.model, t.Id())
		if err != nil {
			return params.ProviderInterfaceInfoResult{}, err
		}
		infos := make([]params.ProviderInterfaceInfo, len(m.LinkLayerDevices))
		for i, d := range m.LinkLayerDevices {
			infos[i] = params.ProviderInterfaceInfo{InterfaceName: d.Name, MACAddress: d.MACAddress, ProviderId: d.ProviderID}
		}
		return params.ProviderInterfaceInfoResult{Interfaces: infos}, nil
	})
	for i := range res {
		res[i].MachineTag = args.Entities[i].Tag
	}
	return params.ProviderInterfaceInfoResults{Results: res}, nil
}

// CompleteMachineRemovals removes the machines, which must be marked for
// removal, in one transaction (state.CompleteMachineRemovals) and releases
// their addresses at the built-in provider. A tag that is not a machine's
// fails the call before anything is removed; a machine that does not
// exist is skipped (Juju's: so that it is idempotent); one not marked
// fails the call and nothing is removed.
func (a *API) CompleteMachineRemovals(ctx context.Context, args params.Entities) error {
	ids := make([]string, len(args.Entities))
	for i, e := range args.Entities {
		t, err := facade.ParseMachineTag(e.Tag)
		if err != nil {
			return err
		}
		ids[i] = t.Id()
	}
	removed, err := a.st.CompleteMachineRemovals(ctx, a.model, ids)
	if err != nil {
		return err
	}
	for _, r := range removed {
		if err := a.env.ReleaseAddresses(r.HostInstanceID, state.EnvironAddresses(r.Released)); err != nil {
			a.ctx.Deps.Logger.Warn("cannot release addresses at the provider", "machine", r.ID, "err", err)
		}
	}
	return nil
}

// WatchMachineRemovals returns, for each model tag, a notify watcher that
// fires when a machine of the model is marked for removal or removed.
func (a *API) WatchMachineRemovals(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return params.NotifyWatchResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.NotifyWatchResult, error) {
		if err := a.checkModel(e.Tag); err != nil {
			return params.NotifyWatchResult{}, err
		}
		w, err := a.st.WatchMachineRemovals(ctx, a.model)
		if err != nil {
			return params.NotifyWatchResult{}, err
		}
		return a.ctx.NotifyResult(w)
	})}, nil
}

// checkModel is Juju's checkModelAuthorization: tag must be a model tag
// naming the connection's model.
func (a *API) checkModel(tag string) error {
	t, err := facade.ParseModelTag(tag)
	if err != nil {
		return err
	}
	if t.Id() != a.model {
		return facade.ErrPerm
	}
	return nil
}
