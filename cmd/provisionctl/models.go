package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

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

With --format json or yaml it prints what changed (added.models) with the
model as result (name, uuid, type, life); with the table format a message
on stderr.`,
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
			m := newMutation().added("models", res.Name).result(res)
			m.Model, m.ModelUUID = res.Name, res.UUID
			return a.writeMutation(cmd.Context(), format, "", m, func() {
				a.infof("Added %s model %q (uuid %s).", res.Type, res.Name, res.UUID)
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
	var (
		format                         formatFlag
		yes, destroyStorage, releaseSt bool
	)
	cmd := &cobra.Command{
		Use:     "remove-model NAME [-y] [--destroy-storage | --release-storage]",
		GroupID: "models",
		Short:   "Remove a model",
		Long: `Remove a model, named by name or UUID, as Juju's destroy-model. An empty
model is removed at once and its name can be used again. A model that still
holds entities becomes dying: it accepts no new entities, its applications
are destroyed (their units removed; a caas application is dead until its
unit provisioner has deleted its pods, an iaas one goes), its machines
become dying with what they host, and it is removed with its last entity.
The controller model cannot be removed.

A model holding persistent storage (storage that outlives its unit or
machine: Kubernetes persistent volumes) is refused unless you say what
becomes of it: --destroy-storage destroys it with the model;
--release-storage takes it out of the model without destroying it (it is
left in the cloud, no longer managed; the message lists its provider ids).
Storage bound to its host (tmpfs, rootfs, loop) goes with the model either
way.

It asks for confirmation on a terminal, showing what the model holds; -y
(--yes) removes without asking. Without a terminal (a script, a pipe) it
refuses unless -y is given.

With --format json or yaml it prints what changed (removed.models when the
model is gone, dying.models when it is dying; removed.storage,
removed.filesystems and removed.volumes for the storage taken out) with the
model as result.`,
		Example: `  provisionctl remove-model prod
  provisionctl remove-model k8s -y --destroy-storage
  provisionctl remove-model k8s -y --release-storage --format json`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: a.completeModelArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if destroyStorage && releaseSt {
				return usagef("--destroy-storage and --release-storage cannot both be specified")
			}
			var decision *bool
			if destroyStorage || releaseSt {
				decision = &destroyStorage
			}
			if !yes {
				if !isTerminal(a.stdin) {
					return usagef("remove-model asks for confirmation and stdin is not a terminal: pass -y to remove model %q without asking", name)
				}
				ok, err := a.confirmRemoveModel(cmd.Context(), name, decision)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("aborted: model %q not removed", name)
				}
			}
			var res params.RemoveModelResult
			if err := a.call(cmd.Context(), "RemoveModel", params.RemoveModelArgs{Model: name, DestroyStorage: decision}, &res); err != nil {
				return persistentStorageError(name, err)
			}
			m := newMutation().removed("models").dying("models").result(res.ModelSummary)
			m.Model, m.ModelUUID = res.Name, res.UUID
			if res.Removed {
				m.removed("models", res.Name)
			} else {
				m.dying("models", res.Name)
			}
			removedStorageMutation(m, res.Storage)
			return a.writeMutation(cmd.Context(), format, "", m, func() {
				if res.Removed {
					a.infof("Removed model %q.", res.Name)
				} else {
					a.infof("Model %q is dying; it is removed when its last entity is.", res.Name)
				}
				a.storageMessage(res.Storage)
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "remove without asking for confirmation")
	cmd.Flags().BoolVar(&destroyStorage, "destroy-storage", false, "destroy the model's persistent storage")
	cmd.Flags().BoolVar(&releaseSt, "release-storage", false, "release the model's persistent storage: take it out of the model, leave it in the cloud")
	addFormatFlag(cmd, &format)
	return cmd
}

// persistentStorageError explains a remove-model refused for the model's
// persistent storage, as Juju's destroy-model does; other errors pass.
func persistentStorageError(model string, err error) error {
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Code != params.CodeHasPersistentStorage {
		return err
	}
	what := "persistent storage"
	if _, counts, ok := strings.Cut(pe.Message, ": "); ok {
		what = counts
	}
	return fmt.Errorf(`cannot remove model %q

The model has persistent storage remaining:
    %s

To destroy the storage, run the remove-model
command again with the "--destroy-storage" option.

To release the storage from the model's management
without destroying it, use the "--release-storage"
option instead: it is left in the cloud`, model, what)
}

// confirmRemoveModel shows what a model holds and asks on the terminal
// whether to remove it.
func (a *app) confirmRemoveModel(ctx context.Context, name string, decision *bool) (bool, error) {
	var st params.ModelStatus
	if err := a.call(ctx, "Status", params.ModelArgs{Model: name}, &st); err != nil {
		return false, err
	}
	var holds []string
	count := func(n int, what string) {
		if n > 0 {
			holds = append(holds, fmt.Sprintf("%d %s", n, plural(n, what)))
		}
	}
	count(len(allMachines(st.Machines)), "machine")
	count(len(st.Applications), "application")
	units := 0
	for _, ap := range st.Applications {
		units += len(ap.Units)
	}
	count(units, "unit")
	count(len(st.Spaces), "space")
	count(len(st.Subnets), "subnet")
	count(len(st.Storage.Filesystems), "filesystem")
	count(len(st.Storage.Volumes), "volume")
	what := "it is empty"
	if len(holds) > 0 {
		what = "it holds " + strings.Join(holds, ", ") + ", which go with it"
	}
	switch {
	case decision == nil:
	case *decision:
		what += "; its persistent storage is destroyed"
	default:
		what += "; its persistent storage is released (left in the cloud)"
	}
	fmt.Fprintf(a.stderr, "Remove %s model %q (uuid %s)? %s.\nThis cannot be undone. Continue? [y/N]: ", st.Type, st.Model, st.UUID, what)
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(a.stderr)
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}

func plural(n int, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// isTerminal reports whether a stream (stdin, stdout) is a terminal.
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// completeModelArg completes the first argument with model names.
func (a *app) completeModelArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeModels(cmd, args, toComplete)
}

// addModelFlag adds --model/-m to cmd: a model name or UUID, by default
// $PROVISIOND_MODEL, else "default".
func (a *app) addModelFlag(cmd *cobra.Command, model *string) {
	def := a.getenv(EnvModel)
	if def == "" {
		def = "default"
	}
	cmd.Flags().StringVarP(model, "model", "m", def, "the model, by name or UUID ($"+EnvModel+" sets the default)")
	_ = cmd.RegisterFlagCompletionFunc("model", a.completeModels)
}
