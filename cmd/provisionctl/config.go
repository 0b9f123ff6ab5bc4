package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about configuration: model-config, controller-config.
func (a *app) addConfigCommands(root *cobra.Command) {
	root.AddCommand(a.modelConfigCommand(), a.controllerConfigCommand())
}

const valueTyping = `Values are typed: true and false are booleans; decimal numbers (42, -1,
2.5, 1e3; no leading zeros) are numbers; a value in "..." or '...' is the
string inside (so '"42"' is a string); anything else is a string as written
(yes, 0755, 5m). Keys start with a letter and hold letters, digits, '-',
'_' and '.'.`

// configMode is what a config verb's arguments ask for.
type configMode struct {
	get   string         // show one key
	set   map[string]any // keys to set
	reset []string       // keys to unset
}

func (m configMode) update() bool { return len(m.set) > 0 || len(m.reset) > 0 }

// parseConfigArgs reads [KEY | KEY=VALUE...] and --reset.
func parseConfigArgs(args, reset []string) (configMode, error) {
	if len(args) == 1 && !strings.Contains(args[0], "=") && len(reset) == 0 {
		return configMode{get: args[0]}, nil
	}
	set, err := parseKVs(args)
	if err != nil {
		return configMode{}, err
	}
	for _, k := range reset {
		if k == "" {
			return configMode{}, usagef("--reset: empty key")
		}
	}
	return configMode{set: set, reset: reset}, nil
}

// writeConfig shows a whole config, or one key of it. With defaults (a
// model's), the table says where each value comes from, as Juju's
// model-config does: "default" when it is the default, else "model".
func (a *app) writeConfig(format formatFlag, what string, cfg, defaults map[string]any, all any, get string) error {
	if get != "" {
		v, ok := cfg[get]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, get)
		}
		return write(a.stdout, format, v, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, formatValue(v))
			return err
		})
	}
	return write(a.stdout, format, all, func(w io.Writer) error {
		if len(cfg) == 0 {
			a.infof("%s has no config set.", upperFirst(what))
			return nil
		}
		t := table{header: []string{"KEY", "VALUE"}, cutLast: true}
		if defaults != nil {
			t.header = []string{"KEY", "FROM", "VALUE"}
		}
		for _, k := range slices.Sorted(maps.Keys(cfg)) {
			v := formatValue(cfg[k])
			if defaults == nil {
				t.add(k, v)
				continue
			}
			from := "model"
			if d, ok := defaults[k]; ok && formatValue(d) == v {
				from = "default"
			}
			t.add(k, from, v)
		}
		return t.write(w)
	})
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (a *app) modelConfigCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		reset  []string
	)
	cmd := &cobra.Command{
		Use:     "model-config [KEY | KEY=VALUE...] [--reset KEY[,KEY...]]",
		GroupID: "config",
		Short:   "Show or change a model's config",
		Long: `Without arguments, show the model's config: every key of Juju's model config
defaults, set when the model was created, and the keys operators set (the
model's name, uuid and type are shown by "models"). FROM says whether a
value is Juju's default or the model's own. With one KEY, show its value.
With KEY=VALUE arguments and/or --reset, set and unset keys in one change;
agents watching the model's config see it at once.

` + valueTyping + `

The keys Juju knows are checked as Juju checks them: their type (a number
for num-provision-workers, a boolean for enable-os-upgrade, "16" and
"true" are taken too), range (num-provision-workers 1 to 100,
update-status-hook-interval 1m to 60m) and values (firewall-mode,
provisioner-harvest-mode, mode, ...); firewall-mode and charmhub-url never
change. Other keys take any string, number or boolean.

--reset sets a key that has a Juju default back to it, as juju
model-config --reset does, and removes any other. name, uuid and type are
read-only. Unsetting a key that is not set is not an error. A change
prints, with --format json or yaml, what changed (changed.models) with the
resulting config as result; a message on stderr with the table format.`,
		Example: `  provisionctl model-config
  provisionctl model-config logging-config
  provisionctl model-config -m k8s logging-config='<root>=DEBUG' automatically-retry-hooks=false
  provisionctl model-config --reset logging-config,http-proxy --format json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := parseConfigArgs(args, reset)
			if err != nil {
				return err
			}
			var res params.ModelConfigInfo
			if !mode.update() {
				if err := a.call(cmd.Context(), "ModelConfig", params.ModelArgs{Model: model}, &res); err != nil {
					return err
				}
				return a.writeConfig(format, fmt.Sprintf("model %q", res.Model), res.Config, res.Defaults, res, mode.get)
			}
			err = a.call(cmd.Context(), "SetModelConfig",
				params.SetModelConfigArgs{Model: model, Config: mode.set, Unset: mode.reset}, &res)
			if err != nil {
				return err
			}
			m := newMutation().changed("models", res.Model).result(res)
			m.Model, m.ModelUUID = res.Model, res.UUID
			return a.writeMutation(cmd.Context(), format, "", m, func() {
				a.infof("Updated the config of model %q.", res.Model)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().StringSliceVar(&reset, "reset", nil, "keys to unset (repeatable, or comma-separated)")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) controllerConfigCommand() *cobra.Command {
	var (
		format formatFlag
		reset  []string
	)
	cmd := &cobra.Command{
		Use:     "controller-config [KEY | KEY=VALUE...] [--reset KEY[,KEY...]]",
		GroupID: "config",
		Short:   "Show or change the controller's config",
		Long: `Without arguments, show the controller's config; with one KEY, its value;
with KEY=VALUE arguments and/or --reset, set and unset keys in one change.
Agents read it through the Provisioner facade.

` + valueTyping + `

controller-uuid, ca-cert and api-port are read-only: the daemon records
them. machine-undertaker is builtin (the default: the controller removes
the machines marked for removal) or external (a controller agent running
Juju's machine undertaker does). The table cuts long values (ca-cert) to
one line; json and yaml show them whole.`,
		Example: `  provisionctl controller-config
  provisionctl controller-config ca-cert --format json | jq -r .
  provisionctl controller-config max-agent-log-lines=1000 audit-log-enabled=true
  provisionctl controller-config --reset audit-log-enabled`,
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := parseConfigArgs(args, reset)
			if err != nil {
				return err
			}
			var res params.ControllerConfigResult
			if !mode.update() {
				if err := a.call(cmd.Context(), "ControllerConfig", nil, &res); err != nil {
					return err
				}
				return a.writeConfig(format, "the controller", res.Config, nil, res, mode.get)
			}
			err = a.call(cmd.Context(), "SetControllerConfig",
				params.SetControllerConfigArgs{Config: mode.set, Unset: mode.reset}, &res)
			if err != nil {
				return err
			}
			uuid, _ := res.Config["controller-uuid"].(string)
			return a.writeMutation(cmd.Context(), format, "", newMutation().changed("controller", uuid).result(res), func() {
				a.infof("Updated the controller config.")
			})
		},
	}
	cmd.Flags().StringSliceVar(&reset, "reset", nil, "keys to unset (repeatable, or comma-separated)")
	addFormatFlag(cmd, &format)
	return cmd
}
