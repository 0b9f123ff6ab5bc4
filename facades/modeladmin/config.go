package modeladmin

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func registerConfig(m *methods) {
	rpc.Handle(m, "ModelConfig", (*ModelAdmin).ModelConfig)
	rpc.Handle(m, "SetModelConfig", (*ModelAdmin).SetModelConfig)
	rpc.HandleNoArgs(m, "ControllerConfig", (*ModelAdmin).ControllerConfig)
	rpc.Handle(m, "SetControllerConfig", (*ModelAdmin).SetControllerConfig)
}

// Keys operators may not set or unset: the model's identity (which the
// Provisioner's ModelConfig reports from the model itself), and what the
// daemon records at start.
var (
	modelReadOnly      = map[string]bool{"name": true, "uuid": true, "type": true}
	controllerReadOnly = map[string]bool{"controller-uuid": true, "ca-cert": true, "api-port": true}
)

// MaxConfigKeyLen bounds the length of a config key.
const MaxConfigKeyLen = 128

var validConfigKey = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_.-]*$`)

// validateConfig checks an update: keys start with a letter and hold
// letters, digits, '-', '_' and '.'; values are strings, numbers or
// booleans (JSON null, lists and objects are refused); no key is both set
// and unset; read-only keys are neither. The first problem, in key order,
// is reported.
func validateConfig(set map[string]any, unset []string, readOnly map[string]bool) error {
	check := func(k string) error {
		if len(k) > MaxConfigKeyLen || !validConfigKey.MatchString(k) {
			return errors.NotValidf("config key %q", k)
		}
		if readOnly[k] {
			return errors.NewNotValid(nil, fmt.Sprintf("config key %q is read-only", k))
		}
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := check(k); err != nil {
			return err
		}
		switch v := set[k].(type) {
		case string, bool, float64, int, int64:
		default:
			return errors.NewNotValid(nil, fmt.Sprintf(
				"config value of %q: %s is not a string, number or boolean", k, jsonKind(v)))
		}
	}
	for _, k := range unset {
		if err := check(k); err != nil {
			return err
		}
		if _, ok := set[k]; ok {
			return errors.NewNotValid(nil, fmt.Sprintf("config key %q is both set and unset", k))
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// ModelConfig returns a model's stored config (the model's name, uuid and
// type are not config: see ListModels) and Juju's defaults for its type.
func (a *ModelAdmin) ModelConfig(ctx context.Context, args params.ModelArgs) (params.ModelConfigInfo, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.ModelConfigInfo{}, err
	}
	return params.ModelConfigInfo{Model: m.Name, UUID: m.UUID, Config: m.Config,
		Defaults: state.ModelConfigDefaults(m.Type)}, nil
}

// SetModelConfig sets and unsets keys of a model's config in one commit and
// returns the config after it. The state types and checks the keys Juju's
// schema knows; unsetting one that has a default sets it back to the
// default; unsetting a key that is not set is not an error; an update that
// changes nothing commits nothing.
func (a *ModelAdmin) SetModelConfig(ctx context.Context, args params.SetModelConfigArgs) (params.ModelConfigInfo, error) {
	if err := validateConfig(args.Config, args.Unset, modelReadOnly); err != nil {
		return params.ModelConfigInfo{}, err
	}
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.ModelConfigInfo{}, err
	}
	if err := a.st.UpdateModelConfig(ctx, m.UUID, args.Config, args.Unset); err != nil {
		return params.ModelConfigInfo{}, err
	}
	return a.ModelConfig(ctx, params.ModelArgs{Model: m.Name})
}

// ControllerConfig returns the controller config, with controller-uuid.
func (a *ModelAdmin) ControllerConfig(ctx context.Context) (params.ControllerConfigResult, error) {
	ctrl, err := a.st.Controller(ctx)
	if err != nil {
		return params.ControllerConfigResult{}, err
	}
	cfg := maps.Clone(ctrl.Config)
	cfg["controller-uuid"] = ctrl.UUID
	return params.ControllerConfigResult{Config: cfg}, nil
}

// SetControllerConfig sets and unsets keys of the controller config in one
// commit and returns the config after it. controller-uuid, ca-cert and
// api-port are read-only.
func (a *ModelAdmin) SetControllerConfig(ctx context.Context, args params.SetControllerConfigArgs) (params.ControllerConfigResult, error) {
	if err := validateConfig(args.Config, args.Unset, controllerReadOnly); err != nil {
		return params.ControllerConfigResult{}, err
	}
	if err := a.st.UpdateControllerConfig(ctx, args.Config, args.Unset); err != nil {
		return params.ControllerConfigResult{}, err
	}
	return a.ControllerConfig(ctx)
}
