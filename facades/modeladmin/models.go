package modeladmin

import (
	"context"
	"maps"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func registerModels(m *methods) {
	rpc.HandleNoArgs(m, "ListModels", (*ModelAdmin).ListModels)
	rpc.Handle(m, "AddModel", (*ModelAdmin).AddModel)
	rpc.Handle(m, "RemoveModel", (*ModelAdmin).RemoveModel)
}

func summary(m state.Model, controllerModel string) params.ModelSummary {
	return params.ModelSummary{
		Name:         m.Name,
		UUID:         m.UUID,
		Type:         string(m.Type),
		Life:         string(m.Life),
		IsController: m.UUID == controllerModel,
	}
}

// ListModels lists every model, sorted by name.
func (a *ModelAdmin) ListModels(ctx context.Context) (params.ListModelsResult, error) {
	ctrl, err := a.st.Controller(ctx)
	if err != nil {
		return params.ListModelsResult{}, err
	}
	models, err := a.st.Models(ctx)
	if err != nil {
		return params.ListModelsResult{}, err
	}
	out := params.ListModelsResult{Models: make([]params.ModelSummary, len(models))}
	for i, m := range models {
		out.Models[i] = summary(m, ctrl.ModelUUID)
	}
	return out, nil
}

// AddModel adds a model. The type defaults to iaas; config values must be
// strings, numbers or booleans, and the keys name, uuid and type are
// reserved.
func (a *ModelAdmin) AddModel(ctx context.Context, args params.AddModelArgs) (params.ModelSummary, error) {
	if err := checkModelName(args.Name); err != nil {
		return params.ModelSummary{}, err
	}
	typ := state.ModelType(args.Type)
	if typ == "" {
		typ = state.ModelTypeIAAS
	}
	if err := validateConfig(args.Config, nil, modelReadOnly); err != nil {
		return params.ModelSummary{}, err
	}
	m, err := a.st.AddModel(ctx, args.Name, typ, withAgentVersion(args.Config, a.ctx.Deps.ServerVersion))
	if err != nil {
		return params.ModelSummary{}, err
	}
	return summary(m, ""), nil
}

// withAgentVersion is a new model's config: a model runs the controller's
// agent version unless told otherwise, as in Juju (agents read it from
// "agent-version": Tools, the CAAS ProvisioningInfo's operator image).
func withAgentVersion(cfg map[string]any, version string) map[string]any {
	if _, ok := cfg["agent-version"]; ok || version == "" {
		return cfg
	}
	out := make(map[string]any, len(cfg)+1)
	maps.Copy(out, cfg)
	out["agent-version"] = version
	return out
}

// RemoveModel starts removing a model, as Juju's destroy-model (state's
// DestroyModel): it becomes dying at once and is removed when it holds no
// entity (at once when it is empty). A model holding persistent storage is
// refused (code "controller/model has persistent storage") unless
// destroy-storage says to destroy (true) or release (false) it. The
// controller model cannot be removed (code "forbidden").
func (a *ModelAdmin) RemoveModel(ctx context.Context, args params.RemoveModelArgs) (params.RemoveModelResult, error) {
	if err := requireName(args.Model); err != nil {
		return params.RemoveModelResult{}, err
	}
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.RemoveModelResult{}, err
	}
	res, err := a.st.DestroyModel(ctx, m.UUID, state.DestroyModelParams{DestroyStorage: args.DestroyStorage})
	if err != nil {
		return params.RemoveModelResult{}, err
	}
	return params.RemoveModelResult{ModelSummary: summary(res.Model, ""), Removed: res.Removed,
		Storage: removedStorage(res.Storage)}, nil
}
