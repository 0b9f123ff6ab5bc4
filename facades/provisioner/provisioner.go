// Package provisioner serves the machine Provisioner facade: version 11
// (the Juju 3.3 schema) and versions 0 and 1 (the 2015 seed's method set
// and JSON shapes), as specs/provisioner.md describes them.
//
// Both versions share one implementation (the methods of *Provisioner,
// which speak the v11 wire types); the 2015 methods in v1.go convert their
// arguments and results, and the few behaviours that differ between the
// eras check p.v1.
//
// Only machine agents and the controller agent may use it, on IAAS model
// endpoints; everyone else gets "permission denied" (code "unauthorized
// access") on every call. Per-entity access follows canAccess
// (facade.Context.CanAccessMachine): permission is checked before
// existence, and bad or non-machine tags are "permission denied" except
// where the spec returns the parse error text.
package provisioner

import (
	"context"
	"slices"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Provisioner is the facade instance of one call.
type Provisioner struct {
	ctx   *facade.Context
	st    *state.State
	model string
	env   *environ.Provider
	// v1 is set for versions 0 and 1 (the 2015 behaviour).
	v1 bool
}

// Register adds the Provisioner versions served to r: 11, and 0 and 1.
func Register(r *facade.Registry) {
	rpc.Register(r, "Provisioner", 11, New, registerV11)
	newV1 := func(c *facade.Context) (*V1, error) {
		p, err := newProvisioner(c, true)
		if err != nil {
			return nil, err
		}
		return &V1{p: p}, nil
	}
	rpc.Register(r, "Provisioner", 0, newV1, registerV1)
	rpc.Register(r, "Provisioner", 1, newV1, registerV1)
}

// registerV11 registers the methods of version 11, in schema order.
func registerV11(m *rpc.Methods[*facade.Context, *Provisioner]) {
	type P = Provisioner
	rpc.HandleNoArgs(m, "APIAddresses", (*P).APIAddresses)
	rpc.HandleNoArgs(m, "APIHostPorts", (*P).APIHostPorts)
	rpc.Handle(m, "AvailabilityZone", (*P).AvailabilityZone)
	rpc.HandleNoArgs(m, "CACert", (*P).CACert)
	rpc.Handle(m, "Constraints", (*P).Constraints)
	rpc.HandleNoArgs(m, "ContainerConfig", (*P).ContainerConfig)
	rpc.Handle(m, "ContainerManagerConfig", (*P).ContainerManagerConfig)
	rpc.Handle(m, "ControllerAPIInfoForModels", (*P).ControllerAPIInfoForModels)
	rpc.HandleNoArgs(m, "ControllerConfig", (*P).ControllerConfig)
	rpc.Handle(m, "DistributionGroup", (*P).DistributionGroup)
	rpc.Handle(m, "DistributionGroupByMachineId", (*P).DistributionGroupByMachineId)
	rpc.Handle(m, "EnsureDead", (*P).EnsureDead)
	rpc.Handle(m, "FindTools", (*P).FindTools)
	rpc.Handle(m, "GetContainerInterfaceInfo", (*P).GetContainerInterfaceInfo)
	rpc.Handle(m, "GetContainerProfileInfo", (*P).GetContainerProfileInfo)
	rpc.Handle(m, "HostChangesForContainers", (*P).HostChangesForContainers)
	rpc.Handle(m, "InstanceId", (*P).InstanceId)
	rpc.Handle(m, "InstanceStatus", (*P).InstanceStatus)
	rpc.Handle(m, "KeepInstance", (*P).KeepInstance)
	rpc.Handle(m, "Life", (*P).Life)
	rpc.HandleNoArgs(m, "MachinesWithTransientErrors", (*P).MachinesWithTransientErrors)
	rpc.Handle(m, "MarkMachinesForRemoval", (*P).MarkMachinesForRemoval)
	rpc.HandleNoArgs(m, "ModelConfig", (*P).ModelConfig)
	rpc.HandleNoArgs(m, "ModelUUID", (*P).ModelUUID)
	rpc.Handle(m, "PrepareContainerInterfaceInfo", (*P).PrepareContainerInterfaceInfo)
	rpc.Handle(m, "ProvisioningInfo", (*P).ProvisioningInfo)
	rpc.Handle(m, "ReleaseContainerAddresses", (*P).ReleaseContainerAddresses)
	rpc.Handle(m, "Remove", (*P).Remove)
	rpc.Handle(m, "SetCharmProfiles", (*P).SetCharmProfiles)
	rpc.HandleNoResult(m, "SetHostMachineNetworkConfig", (*P).SetHostMachineNetworkConfig)
	rpc.Handle(m, "SetInstanceInfo", (*P).SetInstanceInfo)
	rpc.Handle(m, "SetInstanceStatus", (*P).SetInstanceStatus)
	rpc.Handle(m, "SetModificationStatus", (*P).SetModificationStatus)
	rpc.HandleNoResult(m, "SetObservedNetworkConfig", (*P).SetObservedNetworkConfig)
	rpc.Handle(m, "SetPasswords", (*P).SetPasswords)
	rpc.Handle(m, "SetStatus", (*P).SetStatus)
	rpc.Handle(m, "SetSupportedContainers", (*P).SetSupportedContainers)
	rpc.Handle(m, "Status", (*P).Status)
	rpc.Handle(m, "SupportedContainers", (*P).SupportedContainers)
	rpc.Handle(m, "Tools", (*P).Tools)
	rpc.HandleNoArgs(m, "WatchAPIHostPorts", (*P).WatchAPIHostPorts)
	rpc.Handle(m, "WatchAllContainers", (*P).WatchAllContainers)
	rpc.Handle(m, "WatchContainers", (*P).WatchContainers)
	rpc.HandleNoArgs(m, "WatchForModelConfigChanges", (*P).WatchForModelConfigChanges)
	rpc.HandleNoArgs(m, "WatchMachineErrorRetry", (*P).WatchMachineErrorRetry)
	rpc.HandleNoArgs(m, "WatchModelMachineStartTimes", (*P).WatchModelMachineStartTimes)
	rpc.HandleNoArgs(m, "WatchModelMachines", (*P).WatchModelMachines)
}

// New builds the version 11 facade for one call.
func New(c *facade.Context) (*Provisioner, error) { return newProvisioner(c, false) }

// newProvisioner refuses callers that are neither machine agents nor the
// controller agent, and models that are not IAAS.
func newProvisioner(c *facade.Context, v1 bool) (*Provisioner, error) {
	if err := c.RequireMachineAgentOrController(); err != nil {
		return nil, err
	}
	if c.Model.Type != state.ModelTypeIAAS {
		return nil, errors.NewNotSupported(nil, `facade "Provisioner" not supported for a CAAS model API connection`)
	}
	return &Provisioner{ctx: c, st: c.Deps.State, model: c.Model.UUID, env: c.Deps.Environ, v1: v1}, nil
}

// isManager reports whether the caller is the controller agent.
func (p *Provisioner) isManager() bool { return p.ctx.Auth.Controller }

// tagRule is how a per-entity method takes its tags (specs/provisioner.md
// §1.2-1.3).
type tagRule int

const (
	// machineTags: a machine tag; a string that does not parse as one is
	// permission denied, so callers learn nothing about what exists (most
	// methods).
	machineTags tagRule = iota
	// machineTagsParseErrors: a machine tag; a string that does not parse
	// gives its parse error text, code "" (the exceptions of §1.3).
	machineTagsParseErrors
	// entityTags: any entity tag parses (StatusSetter, StatusGetter); a bad
	// one gives its parse error text, a reachable non-machine one (there is
	// none) or an unreachable one permission denied.
	entityTags
)

// machineID is the one check of a per-entity method's tag, in the spec's
// order: it parses by rule, then the caller must reach the machine
// (Context.CanAccessMachine), else permission denied. Existence is not
// checked: a write reads the record in its own transaction and fails with
// "machine N not found" (one read of the record per write, not two).
func (p *Provisioner) machineID(tag string, rule tagRule) (string, error) {
	var t names.Tag
	var err error
	if rule == entityTags {
		t, err = facade.ParseTag(tag)
	} else {
		var mt names.MachineTag
		mt, err = facade.ParseMachineTag(tag)
		t = mt
	}
	switch {
	case err != nil && rule == machineTags:
		return "", facade.ErrPerm
	case err != nil:
		return "", err
	case !p.ctx.CanAccessMachine(t):
		return "", facade.ErrPerm
	}
	mt, ok := t.(names.MachineTag)
	if !ok {
		return "", facade.ErrPerm
	}
	return mt.Id(), nil
}

// machine is machineID and then the machine's record ("machine N not
// found" if there is none).
func (p *Provisioner) machine(ctx context.Context, tag string, rule tagRule) (state.Machine, error) {
	id, err := p.machineID(tag, rule)
	if err != nil {
		return state.Machine{}, err
	}
	return p.st.Machine(ctx, p.model, id)
}

// notProvisioned is the error for a machine without an instance id:
// "machine 0 not provisioned", in the 2015 seed and Juju 3 alike (the
// login path uses the same text).
func notProvisioned(id string) error { return errors.NotProvisionedf("machine %s", id) }

func lifeString(l state.Life) string { return string(l) }

func statusResult(m state.Machine, s state.Status) params.StatusResult {
	data := facade.StatusData(s.Data)
	if data == nil {
		data = map[string]any{}
	}
	r := params.StatusResult{Id: m.ID, Life: lifeString(m.Life), Status: s.Status, Info: s.Message, Data: data}
	if !s.Since.IsZero() {
		since := s.Since.UTC()
		r.Since = &since
	}
	return r
}

func cloneStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
