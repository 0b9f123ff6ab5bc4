// Package provisioner serves the machine Provisioner facade.
//
// This is the first slice of version 11: the model-level methods
// (ModelUUID, ModelConfig, ControllerConfig, WatchForModelConfigChanges)
// that prove the path from a committed change to a watcher's Next. The
// rest of v11 and version 1 follow (specs/provisioner.md).
//
// Only machine agents and the controller agent may use it; everyone else
// gets "permission denied" (code "unauthorized access") on every call.
package provisioner

import (
	"context"

	"provisiond/facades/facade"
	"provisiond/rpc"
	"provisiond/rpc/params"
)

// Provisioner is the facade instance of one call.
type Provisioner struct {
	ctx *facade.Context
}

// Register adds the Provisioner versions served to r.
func Register(r *facade.Registry) {
	rpc.Register(r, "Provisioner", 11, New, func(m *rpc.Methods[*facade.Context, *Provisioner]) {
		rpc.HandleNoArgs(m, "ControllerConfig", (*Provisioner).ControllerConfig)
		rpc.HandleNoArgs(m, "ModelConfig", (*Provisioner).ModelConfig)
		rpc.HandleNoArgs(m, "ModelUUID", (*Provisioner).ModelUUID)
		rpc.HandleNoArgs(m, "WatchForModelConfigChanges", (*Provisioner).WatchForModelConfigChanges)
	})
}

// New refuses callers that are not machine agents.
func New(c *facade.Context) (*Provisioner, error) {
	if err := c.RequireMachineAgentOrController(); err != nil {
		return nil, err
	}
	return &Provisioner{ctx: c}, nil
}

// ModelUUID returns the UUID of the connection's model.
func (p *Provisioner) ModelUUID(context.Context) (params.StringResult, error) {
	return params.StringResult{Result: p.ctx.Model.UUID}, nil
}

// ModelConfig returns the current configuration of the model.
func (p *Provisioner) ModelConfig(context.Context) (params.ModelConfigResult, error) {
	m, err := p.ctx.Deps.State.Model(p.ctx.Model.UUID)
	if err != nil {
		return params.ModelConfigResult{}, err
	}
	cfg := make(map[string]any, len(m.Config)+3)
	for k, v := range m.Config {
		cfg[k] = v
	}
	cfg["name"] = m.Name
	cfg["uuid"] = m.UUID
	cfg["type"] = string(m.Type)
	return params.ModelConfigResult{Config: cfg}, nil
}

// ControllerConfig returns the controller's configuration.
func (p *Provisioner) ControllerConfig(context.Context) (params.ControllerConfigResult, error) {
	ctrl, err := p.ctx.Deps.State.Controller()
	if err != nil {
		return params.ControllerConfigResult{}, err
	}
	cfg := map[string]any{}
	for k, v := range ctrl.Config {
		cfg[k] = v
	}
	cfg["controller-uuid"] = ctrl.UUID
	return params.ControllerConfigResult{Config: cfg}, nil
}

// WatchForModelConfigChanges returns a notify watcher that fires when the
// model's configuration changes.
func (p *Provisioner) WatchForModelConfigChanges(context.Context) (params.NotifyWatchResult, error) {
	w, err := p.ctx.Deps.State.WatchModelConfig(p.ctx.Model.UUID)
	if err != nil {
		return params.NotifyWatchResult{}, err
	}
	return p.ctx.NotifyResult(w)
}
