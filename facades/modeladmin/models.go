package modeladmin

import (
	"context"

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
func (a *ModelAdmin) ListModels(context.Context) (params.ListModelsResult, error) {
	ctrl, err := a.st.Controller()
	if err != nil {
		return params.ListModelsResult{}, err
	}
	models, err := a.st.Models()
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
func (a *ModelAdmin) AddModel(_ context.Context, args params.AddModelArgs) (params.ModelSummary, error) {
	if err := state.ValidateModelName(args.Name); err != nil {
		return params.ModelSummary{}, err
	}
	typ := state.ModelType(args.Type)
	if typ == "" {
		typ = state.ModelTypeIAAS
	}
	if err := validateConfig(args.Config, nil, modelReadOnly); err != nil {
		return params.ModelSummary{}, err
	}
	m, err := a.st.AddModel(args.Name, typ, args.Config)
	if err != nil {
		return params.ModelSummary{}, err
	}
	return summary(m, ""), nil
}

// RemoveModel starts removing a model: it becomes dying at once and is
// removed when it holds no entity (at once when it is empty). The
// controller model cannot be removed (code "forbidden").
func (a *ModelAdmin) RemoveModel(_ context.Context, args params.RemoveModelArgs) (params.RemoveModelResult, error) {
	if err := requireName(args.Model); err != nil {
		return params.RemoveModelResult{}, err
	}
	m, err := a.model(args.Model)
	if err != nil {
		return params.RemoveModelResult{}, err
	}
	m, removed, err := a.st.RemoveModel(m.UUID)
	if err != nil {
		return params.RemoveModelResult{}, err
	}
	return params.RemoveModelResult{ModelSummary: summary(m, ""), Removed: removed}, nil
}
