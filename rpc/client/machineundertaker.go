package client

import (
	"context"

	"github.com/provisiond/provisiond/rpc/params"
)

// MachineUndertaker facade name and the version the typed client speaks.
const (
	MachineUndertakerFacade  = "MachineUndertaker"
	MachineUndertakerVersion = 1
)

// MachineUndertaker is the typed client of the MachineUndertaker facade,
// version 1 (Juju's api/controller/machineundertaker calls the same
// methods): what a controller agent running a machine undertaker uses to
// list a model's machines marked for removal, read their interfaces at the
// provider and complete their removal. The controller agent is its only
// caller, on a model endpoint; model tags name that model
// (ModelTag(uuid)). The controller runs its own undertaker too (docs/provisionctl.md,
// Machine removal): CompleteMachineRemovals of a machine already removed succeeds.
// A MachineUndertaker is safe for concurrent use, as its Conn.
type MachineUndertaker struct {
	f facade
}

// NewMachineUndertaker returns the MachineUndertaker client of c, which
// must be logged in as the controller agent on a model endpoint.
func NewMachineUndertaker(c *Conn) *MachineUndertaker {
	return &MachineUndertaker{f: facade{c, MachineUndertakerFacade, MachineUndertakerVersion}}
}

// Conn returns the connection u calls on.
func (u *MachineUndertaker) Conn() *Conn { return u.f.c }

// AllMachineRemovals returns, for each model tag, the machines of the
// model marked for removal (Entities is nil when there are none).
func (u *MachineUndertaker) AllMachineRemovals(ctx context.Context, args params.Entities) (params.EntitiesResults, error) {
	return bulk[params.EntitiesResults](ctx, u.f, "AllMachineRemovals", args, len(args.Entities))
}

// CompleteMachineRemovals removes the machines, which must be marked for
// removal, once their provider resources are released; machines already
// gone are skipped.
func (u *MachineUndertaker) CompleteMachineRemovals(ctx context.Context, args params.Entities) error {
	return u.f.call(ctx, "CompleteMachineRemovals", args, nil)
}

// GetMachineProviderInterfaceInfo returns each machine's network
// interfaces at the provider.
func (u *MachineUndertaker) GetMachineProviderInterfaceInfo(ctx context.Context, args params.Entities) (params.ProviderInterfaceInfoResults, error) {
	return bulk[params.ProviderInterfaceInfoResults](ctx, u.f, "GetMachineProviderInterfaceInfo", args, len(args.Entities))
}

// WatchMachineRemovals watches, for each model tag, the model's removals
// (a mark added, a machine removed); start a watch per item with
// NewNotifyWatch.
func (u *MachineUndertaker) WatchMachineRemovals(ctx context.Context, args params.Entities) (params.NotifyWatchResults, error) {
	return bulk[params.NotifyWatchResults](ctx, u.f, "WatchMachineRemovals", args, len(args.Entities))
}
