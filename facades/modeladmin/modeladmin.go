// Package modeladmin serves ModelAdmin v1, provisiond's own facade for
// operators (provisionctl): list, add and remove models, read and change
// model and controller config, and watch everything that changes in a
// model.
//
// Only controller superusers may use it; everyone else, agents included,
// gets "permission denied" (code "unauthorized access") on every call. It
// is served on the controller endpoint (/api) and on model endpoints.
//
// Models are named by name or UUID in the params (params.ModelArgs). An
// empty name means the connection's model on a model endpoint, and the
// model called "default" on the controller endpoint.
//
// The methods are grouped one file per group of provisionctl verbs
// (models.go, config.go, watch.go, machines.go, network.go,
// agentbinaries.go, status.go, applications.go, storage.go); each file has
// a register function that Register calls.
//
// What operators type (bases, constraints, placements, storage
// constraints, address ranges) reaches the facade as strings: it parses
// and checks them (state.ParseBase, state.ParseConstraints,
// storage.ParseConstraints), so every client gets the same rules, and bad
// input changes nothing.
package modeladmin

import (
	"context"
	"fmt"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/state"
)

// Name and Version of the facade.
const (
	Name    = "ModelAdmin"
	Version = 1
)

// ModelAdmin is the facade instance of one call.
type ModelAdmin struct {
	ctx *facade.Context
	st  *state.State
	// presence is who is connected, for Status (nil: not tracked).
	presence *presence.Recorder
}

type methods = rpc.Methods[*facade.Context, *ModelAdmin]

// Register adds ModelAdmin v1 to r.
func Register(r *facade.Registry) {
	rpc.Register(r, Name, Version, New, func(m *methods) {
		registerModels(m)
		registerConfig(m)
		registerWatch(m)
		registerWatchModels(m)
		registerMachines(m)
		registerNetwork(m)
		registerAgentBinaries(m)
		registerStatus(m)
		registerApplications(m)
		registerStorage(m)
		registerStorageRemoval(m)
		registerController(m)
		registerRemovals(m)
		registerEntities(m)
		registerHistory(m)
	})
}

// New refuses callers that are not controller superusers.
func New(c *facade.Context) (*ModelAdmin, error) {
	if err := c.RequireSuperuser(); err != nil {
		return nil, err
	}
	return &ModelAdmin{ctx: c, st: c.Deps.State, presence: c.Deps.Presence}, nil
}

// model resolves a model from the params: a name or a UUID (as Juju's
// -m), see the package documentation for the empty name. A UUID that is
// no model's is tried as a name (a name may look like a UUID).
func (a *ModelAdmin) model(ctx context.Context, name string) (state.Model, error) {
	return a.findModel(ctx, name, a.st.Model)
}

// modelHead is model without the model's config (Config nil) when name is
// empty or a UUID: for a method that reads no config.
func (a *ModelAdmin) modelHead(ctx context.Context, name string) (state.Model, error) {
	return a.findModel(ctx, name, a.st.ModelHead)
}

// findModel is model, reading a model by UUID with byUUID.
func (a *ModelAdmin) findModel(ctx context.Context, name string,
	byUUID func(context.Context, string) (state.Model, error)) (state.Model, error) {
	if name == "" {
		if !a.ctx.ControllerOnly {
			return byUUID(ctx, a.ctx.Model.UUID)
		}
		name = state.DefaultModelName
	}
	if state.IsValidUUID(name) {
		m, err := byUUID(ctx, name)
		if !errors.Is(err, errors.NotFound) {
			return m, err
		}
		if state.ValidateModelName(name) != nil {
			return state.Model{}, errors.NotFoundf("model %q", name)
		}
	}
	if err := checkModelName(name); err != nil {
		return state.Model{}, err
	}
	return a.st.ModelByName(ctx, name)
}

// modelNameRule is Juju's rule for model names, as error messages state it.
const modelNameRule = "lowercase letters, digits and hyphens, starting with a letter, at most 63 characters"

// checkModelName is state.ValidateModelName with a message that names
// the rule.
func checkModelName(name string) error {
	if err := state.ValidateModelName(name); err != nil {
		return errors.NewNotValid(nil, fmt.Sprintf("model name %q not valid: %s", name, modelNameRule))
	}
	return nil
}

// requireName refuses an empty model name where there is no default.
func requireName(name string) error {
	if name == "" {
		return errors.NewNotValid(nil, "model name is required")
	}
	return nil
}
