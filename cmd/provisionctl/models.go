package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about models: models, add-model, remove-model.
func (a *app) addModelCommands(root *cobra.Command) {
	root.AddCommand(a.modelsCommand(), a.addModelCommand(), a.removeModelCommand())
}

func (a *app) modelNames(ctx context.Context) ([]string, error) {
	var res params.ListModelsResult
	if err := a.call(ctx, "ListModels", nil, &res); err != nil {
		return nil, err
	}
	names := make([]string, len(res.Models))
	for i, m := range res.Models {
		names[i] = m.Name
	}
	return names, nil
}

func (a *app) modelsCommand() *cobra.Command {
	var format formatFlag
	cmd := &cobra.Command{
		Use:     "models",
		GroupID: "models",
		Short:   "List the models",
		Long: `List every model of the controller, sorted by name: its name, type (iaas or
caas), life (alive, or dying while its entities are removed) and UUID. The
controller model is marked in json and yaml output with "is-controller".`,
		Example: `  provisionctl models
  provisionctl models --format json | jq -r '.models[].name'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res params.ListModelsResult
			if err := a.call(cmd.Context(), "ListModels", nil, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(w io.Writer) error {
				t := table{header: []string{"NAME", "TYPE", "LIFE", "UUID"}}
				for _, m := range res.Models {
					t.add(m.Name, m.Type, m.Life, m.UUID)
				}
				return t.write(w)
			})
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) addModelCommand() *cobra.Command {
	var (
		format formatFlag
		typ    string
		config []string
	)
	cmd := &cobra.Command{
		Use:     "add-model NAME [--type iaas|caas] [--config KEY=VALUE]...",
		GroupID: "models",
		Short:   "Add a model",
		Long: `Add a model. NAME is lowercase letters, digits and hyphens, starting with a
letter, at most 63 characters. --type is iaas (machines; the default) or
caas (Kubernetes). --config sets initial config, once per key; values are
typed as in model-config.

With --format json or yaml it prints the model's name, uuid, type and life;
with the table format a message on stderr.`,
		Example: `  provisionctl add-model prod
  provisionctl add-model k8s --type caas --config logging-config='<root>=DEBUG'
  provisionctl add-model edge --config update-status-hook-interval=5m --format json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := parseKVs(config)
			if err != nil {
				return err
			}
			if typ != "iaas" && typ != "caas" {
				return usagef("--type %q: want iaas or caas", typ)
			}
			var res params.ModelSummary
			err = a.call(cmd.Context(), "AddModel", params.AddModelArgs{Name: args[0], Type: typ, Config: cfg}, &res)
			if err != nil {
				return err
			}
			return write(a.stdout, format, res, func(io.Writer) error {
				a.infof("Added %s model %q (uuid %s).", res.Type, res.Name, res.UUID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&typ, "type", "iaas", "model type: iaas or caas")
	cmd.Flags().StringArrayVar(&config, "config", nil, "initial config KEY=VALUE (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions([]string{"iaas", "caas"}, cobra.ShellCompDirectiveNoFileComp))
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) removeModelCommand() *cobra.Command {
	var format formatFlag
	cmd := &cobra.Command{
		Use:     "remove-model NAME",
		GroupID: "models",
		Short:   "Remove a model",
		Long: `Remove a model. An empty model is removed at once and its name can be used
again. A model that still holds entities (machines, applications...) becomes
dying: it accepts no new entities and is removed when its last entity is.
The controller model cannot be removed. There is no prompt.

With --format json or yaml it prints the model and "removed": true when it
is gone, false when it is dying.`,
		Example: `  provisionctl remove-model prod
  provisionctl remove-model k8s --format json`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: a.completeModelArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			var res params.RemoveModelResult
			if err := a.call(cmd.Context(), "RemoveModel", params.RemoveModelArgs{Model: args[0]}, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(io.Writer) error {
				if res.Removed {
					a.infof("Removed model %q.", res.Name)
				} else {
					a.infof("Model %q is dying; it is removed when its last entity is.", res.Name)
				}
				return nil
			})
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// completeModelArg completes the first argument with model names.
func (a *app) completeModelArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeModels(cmd, args, toComplete)
}

// addModelFlag adds --model/-m (default "default") to cmd.
func (a *app) addModelFlag(cmd *cobra.Command, model *string) {
	cmd.Flags().StringVarP(model, "model", "m", "default", "the model, by name")
	_ = cmd.RegisterFlagCompletionFunc("model", a.completeModels)
}
