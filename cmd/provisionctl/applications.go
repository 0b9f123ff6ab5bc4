package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about applications and units: deploy, add-unit, remove-unit,
// scale, config, trust, constraints, set-pod-spec, remove-application.
func (a *app) addApplicationCommands(root *cobra.Command) {
	root.AddCommand(a.deployCommand(), a.addUnitCommand(), a.removeUnitCommand(), a.scaleCommand(),
		a.appConfigCommand(), a.trustCommand(), a.constraintsCommand(), a.setPodSpecCommand(),
		a.removeApplicationCommand())
}

// readFile reads a file named on the command line (its contents are sent
// as text; the server parses them).
func readFile(what, path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", what, err)
	}
	return string(data), nil
}

func (a *app) deployCommand() *cobra.Command {
	var (
		format   formatFlag
		model    string
		metaFile string
		config   []string
		args     params.DeployArgs
		scale    int
	)
	cmd := &cobra.Command{
		Use:     "deploy APP --charm-metadata FILE [--scale N] [--config K=V]... [--constraints C] [--storage NAME=POOL,SIZE,COUNT]... [--device NAME=COUNT,TYPE]... [--trust]",
		GroupID: "applications",
		Short:   "Deploy an application from a charm's metadata.yaml",
		Long: `Deploy application APP from a charm's metadata.yaml: its name, storage,
devices, deployment (type, mode, service) and containers. The file is sent
as it is; the daemon parses it, and an error names the line. The charm is
stored as local:NAME-REV (the same metadata deployed again reuses it).

In a caas model the application gets --scale units (default 1) as the unit
provisioner starts pods. In an iaas model it gets none: add them with
add-unit (--scale and --device are refused there).

--config sets the application's config (KEY=VALUE, repeatable; values are
typed as in model-config); --trust sets "trust" to true. --constraints are
Juju's ("mem=4G"). --storage NAME=POOL,SIZE,COUNT (any of the three, in any
order; repeatable) asks for storage the charm declares, from a pool of the
model or a provider type; what is left out comes from the charm (its
minimum count and size, else 1 and 1G) and the model (workload-storage in
caas models). --device NAME=[COUNT,]TYPE[,KEY=VALUE;...] (caas) asks for
devices the charm declares.

It prints a message, or with --format json or yaml what changed
(added.applications) with the application as show-application prints it.
Bad input deploys nothing.`,
		Example: `  provisionctl deploy gitlab --charm-metadata ./gitlab/metadata.yaml -m k8s --scale 3 \
      --storage data=fast,10G --config port=8080 --trust
  provisionctl deploy db --charm-metadata db/metadata.yaml --constraints "cores=2 mem=4G" \
      --storage disk=loop,20G,2
  provisionctl deploy trainer --charm-metadata m.yaml -m k8s --device gpu=2,nvidia.com/gpu --format json`,
		Args: exactArgs("APP"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if metaFile == "" {
				return usagef("deploy needs --charm-metadata FILE")
			}
			for _, s := range args.Storage {
				if err := checkStorageSizes("--storage", s); err != nil {
					return err
				}
			}
			cfg, err := parseKVs(config)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("scale") {
				args.Scale = &scale
			}
			if args.CharmMetadata, err = readFile("charm metadata", metaFile); err != nil {
				return err
			}
			args.Model, args.Application = model, pos[0]
			if len(cfg) > 0 {
				args.Config = cfg
			}
			var res params.ApplicationStatus
			if err := a.call(cmd.Context(), "Deploy", args, &res); err != nil {
				return err
			}
			m, err := a.applicationMutation(cmd.Context(), format, model, res)
			if err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, m.added("applications", res.Name), func() {
				if res.Scale > 0 || cmd.Flags().Changed("scale") {
					a.infof("Deployed %q (charm %s, scale %d).", res.Name, res.Charm, res.Scale)
				} else {
					a.infof("Deployed %q (charm %s).", res.Name, res.Charm)
				}
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().StringVar(&metaFile, "charm-metadata", "", "the charm's metadata.yaml (required)")
	cmd.Flags().IntVar(&scale, "scale", 1, "units of a caas application")
	cmd.Flags().StringArrayVar(&config, "config", nil, "application config KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&args.Constraints, "constraints", "", `constraints in Juju's syntax ("mem=4G")`)
	cmd.Flags().StringArrayVar(&args.Storage, "storage", nil, "storage NAME=POOL,SIZE,COUNT (repeatable)")
	cmd.Flags().StringArrayVar(&args.Devices, "device", nil, "devices NAME=[COUNT,]TYPE[,KEY=VALUE;...] (repeatable; caas)")
	cmd.Flags().BoolVar(&args.Trust, "trust", false, `set config "trust" to true`)
	_ = cmd.MarkFlagFilename("charm-metadata", "yaml", "yml")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) addUnitCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		args   params.AddUnitsArgs
	)
	cmd := &cobra.Command{
		Use:     "add-unit APP [--to MACHINE[,MACHINE...]] [--count N]",
		GroupID: "applications",
		Short:   "Add units of an iaas application, placed on machines",
		Long: `Add units of an application in an iaas model. --to places them on existing
machines (or containers), in order; units beyond the machines given each
get a new machine, made with the application's constraints and a volume for
each instance of its block storage (as Juju does without --to). --count
defaults to the number of machines given, or 1.

Units of caas applications follow the application's scale: use scale.

It prints the new units, one a line (json/yaml: what changed, with
added.units and added.machines, the machines made for them). Everything
is checked before the first unit is added.`,
		Example: `  provisionctl add-unit db
  provisionctl add-unit db --to 3
  provisionctl add-unit db --to 3,3/lxd/0 --count 4 --format json`,
		Args:              exactArgs("APP"),
		ValidArgsFunction: firstArg(a.completer(a.applicationNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if cmd.Flags().Changed("count") && args.Count < 1 {
				return usagef("--count %d: want at least 1", args.Count)
			}
			args.Model, args.Application = model, pos[0]
			var res params.AddUnitsResult
			if err := a.call(cmd.Context(), "AddUnits", args, &res); err != nil {
				return err
			}
			if format == formatTable {
				for _, u := range res.Units {
					if _, err := fmt.Fprintln(a.stdout, u); err != nil {
						return err
					}
				}
				return nil
			}
			return a.writeMutation(cmd.Context(), format, model,
				newMutation().added("units", res.Units...).added("machines", res.Machines...), nil)
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().StringSliceVar(&args.To, "to", nil, "machines to place the units on, in order (comma-separated)")
	_ = cmd.RegisterFlagCompletionFunc("to", a.completer(a.machineIDs))
	cmd.Flags().IntVarP(&args.Count, "count", "n", 0, "how many units to add (default: the machines given, or 1)")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) removeUnitCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "remove-unit UNIT...",
		GroupID: "applications",
		Short:   "Remove units of iaas applications",
		Long: `Remove units of iaas applications. All are checked first (each must
exist), then removed at once, as Juju removes a unit whose agent never ran:
provisiond models no unit agent that would finish a dying unit. Their
subordinates go with them. A machine left without a unit, hosting no
container, becomes dying (as Juju's remove-unit) and its agents take it
down. Units of caas applications follow the application's scale: use
scale.

json/yaml: what changed (removed.units, dying.machines); the table format
prints a message on stderr.`,
		Example: `  provisionctl remove-unit db/1
  provisionctl remove-unit db/1 db/2 --format json`,
		Args:              minArgs(1, "UNIT..."),
		ValidArgsFunction: a.completer(a.unitNames),
		RunE: func(cmd *cobra.Command, units []string) error {
			var res params.RemoveUnitsResult
			if err := a.call(cmd.Context(), "RemoveUnits", params.RemoveUnitsArgs{Model: model, Units: units}, &res); err != nil {
				return err
			}
			m := newMutation().removed("units", res.Removed...).dying("machines", res.DyingMachines...)
			return a.writeMutation(cmd.Context(), format, model, m, func() {
				if len(res.Removed) == 1 {
					a.infof("Removed unit %s.", res.Removed[0])
				} else {
					a.infof("Removed units %s.", strings.Join(res.Removed, ", "))
				}
				a.machinesDyingMessage(res.DyingMachines)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) scaleCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "scale APP N",
		GroupID: "applications",
		Short:   "Set the scale of a caas application",
		Long: `Set the desired number of units of a caas application (Juju's
scale-application). The unit provisioner sees it at once and starts or
stops pods; until the cluster reports the new scale, its own scale reports
are refused. (A negative N needs "--" before it; the daemon refuses it.)

It prints a message, or with --format json or yaml what changed
(changed.applications) with the application as show-application prints it.`,
		Example: `  provisionctl scale gitlab 3 -m k8s
  provisionctl scale gitlab 0 -m k8s --format json`,
		Args:              exactArgs("APP", "N"),
		ValidArgsFunction: firstArg(a.completer(a.applicationNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			n, err := strconv.Atoi(pos[1])
			if err != nil {
				return usagef("scale %q is not a whole number", pos[1])
			}
			var res params.ApplicationStatus
			if err := a.call(cmd.Context(), "ScaleApplication", params.ScaleArgs{Model: model, Application: pos[0], Scale: n}, &res); err != nil {
				return err
			}
			m, err := a.applicationMutation(cmd.Context(), format, model, res)
			if err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, m.changed("applications", res.Name), func() {
				a.infof("Scaled %q to %d.", res.Name, res.Scale)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) appConfigCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		reset  []string
	)
	cmd := &cobra.Command{
		Use:     "config APP [KEY | KEY=VALUE...] [--reset KEY[,KEY...]]",
		GroupID: "applications",
		Short:   "Show or change an application's config",
		Long: `With APP alone, show the application's config; with one KEY, its value;
with KEY=VALUE arguments and/or --reset, set and unset keys in one change.
The agents watching the application's config (its trust hash) see it.

` + valueTyping + `

"trust" must be true or false (see also trust). A change prints the
resulting config with --format json or yaml, a message with the table
format.`,
		Example: `  provisionctl config gitlab -m k8s
  provisionctl config gitlab -m k8s port=8080 external-hostname=git.example.com
  provisionctl config gitlab -m k8s --reset port --format json`,
		Args:              minArgs(1, "APP"),
		ValidArgsFunction: firstArg(a.completer(a.applicationNames)),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode, err := parseConfigArgs(args[1:], reset)
			if err != nil {
				return err
			}
			app := args[0]
			var res params.ApplicationConfigInfo
			if !mode.update() {
				if err := a.call(cmd.Context(), "ApplicationConfig", params.ApplicationArgs{Model: model, Application: app}, &res); err != nil {
					return err
				}
				return a.writeConfig(format, fmt.Sprintf("application %q", res.Application), res.Config, nil, res, mode.get)
			}
			err = a.call(cmd.Context(), "SetApplicationConfig",
				params.SetApplicationConfigArgs{Model: model, Application: app, Config: mode.set, Unset: mode.reset}, &res)
			if err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().changed("applications", res.Application).result(res), func() {
				a.infof("Updated the config of application %q.", res.Application)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().StringSliceVar(&reset, "reset", nil, "keys to unset (repeatable, or comma-separated)")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) trustCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		remove bool
	)
	cmd := &cobra.Command{
		Use:     "trust APP [--remove]",
		GroupID: "applications",
		Short:   "Trust an application with the cloud credential, or stop",
		Long: `Set an application's "trust" config option (--remove clears it to
false). The agents watching its config see the change.

It prints a message, or with --format json or yaml what changed
(changed.applications) with the application as show-application prints it.`,
		Example: `  provisionctl trust gitlab -m k8s
  provisionctl trust gitlab -m k8s --remove --format json`,
		Args:              exactArgs("APP"),
		ValidArgsFunction: firstArg(a.completer(a.applicationNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var res params.ApplicationStatus
			if err := a.call(cmd.Context(), "SetApplicationTrust",
				params.SetTrustArgs{Model: model, Application: pos[0], Trust: !remove}, &res); err != nil {
				return err
			}
			m, err := a.applicationMutation(cmd.Context(), format, model, res)
			if err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, m.changed("applications", res.Name), func() {
				if res.Trust {
					a.infof("Application %q is trusted.", res.Name)
				} else {
					a.infof("Application %q is no longer trusted.", res.Name)
				}
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().BoolVar(&remove, "remove", false, "stop trusting the application")
	addFormatFlag(cmd, &format)
	return cmd
}

// constraintsInfo is what constraints prints in json/yaml.
type constraintsInfo struct {
	Application string `json:"application"`
	Constraints string `json:"constraints"`
}

func (a *app) constraintsCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "constraints APP [VALUE]",
		GroupID: "applications",
		Short:   "Show or set an application's constraints",
		Long: `Without VALUE, print an application's constraints (nothing when it has
none). With VALUE, replace them: Juju's syntax ("cores=2 mem=4G"; sizes
such as 512M, 1G, 1GiB); "" clears them. Spaces named must exist. The agents
watching the application see the change; new machines made by add-unit
take them.

json/yaml: {"application": ..., "constraints": ...}; when setting, what
changed (changed.applications) with that as result.`,
		Example: `  provisionctl constraints db
  provisionctl constraints db "cores=4 mem=8G"
  provisionctl constraints gitlab -m k8s "" --format json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("constraints needs APP and at most one VALUE, got %s", arguments(len(args)))
			}
			return nil
		},
		ValidArgsFunction: firstArg(a.completer(a.applicationNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var res params.ApplicationStatus
			var err error
			if len(pos) == 1 {
				err = a.call(cmd.Context(), "Application", params.ApplicationArgs{Model: model, Application: pos[0]}, &res)
			} else {
				err = a.call(cmd.Context(), "SetApplicationConstraints",
					params.SetApplicationConstraintsArgs{Model: model, Application: pos[0], Constraints: pos[1]}, &res)
			}
			if err != nil {
				return err
			}
			out := constraintsInfo{Application: res.Name, Constraints: res.Constraints}
			if len(pos) == 2 {
				return a.writeMutation(cmd.Context(), format, model, newMutation().changed("applications", res.Name).result(out), func() {
					a.infof("Set the constraints of %q.", res.Name)
				})
			}
			return write(a.stdout, format, out, func(w io.Writer) error {
				if res.Constraints == "" {
					return nil
				}
				_, err := fmt.Fprintln(w, res.Constraints)
				return err
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) setPodSpecCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		raw    bool
	)
	cmd := &cobra.Command{
		Use:     "set-pod-spec APP FILE [--raw]",
		GroupID: "applications",
		Short:   "Set the pod spec of a caas application",
		Long: `Set the pod spec of a caas application from a YAML file (with --raw, its
raw Kubernetes spec). The file is sent as it is; the daemon requires one
YAML mapping. Each change counts up the spec's upgrade counter, and the
unit provisioner watching the spec sees it.

json/yaml: what changed (changed.applications) with {"application",
"upgrade-counter", "raw"} as result.`,
		Example: `  provisionctl set-pod-spec gitlab spec.yaml -m k8s
  provisionctl set-pod-spec gitlab deployment.yaml -m k8s --raw --format json`,
		Args:              exactArgs("APP", "FILE"),
		ValidArgsFunction: firstArg(a.completer(a.applicationNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			what := "pod spec"
			if raw {
				what = "raw k8s spec"
			}
			spec, err := readFile(what, pos[1])
			if err != nil {
				return err
			}
			var res params.PodSpecResult
			if err := a.call(cmd.Context(), "SetPodSpec",
				params.SetPodSpecArgs{Model: model, Application: pos[0], Spec: spec, Raw: raw}, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().changed("applications", res.Application).result(res), func() {
				a.infof("Set the %s of %q (upgrade counter %d).", what, res.Application, res.UpgradeCounter)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().BoolVar(&raw, "raw", false, "the file is a raw Kubernetes spec")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) removeApplicationCommand() *cobra.Command {
	var (
		format         formatFlag
		model          string
		destroyStorage bool
	)
	cmd := &cobra.Command{
		Use:     "remove-application APP [--destroy-storage]",
		GroupID: "applications",
		Short:   "Remove an application",
		Long: `Remove an application, as Juju's remove-application: its units are removed
at once (provisiond models no unit agent that would finish them), with
their subordinates; their storage is detached and kept, or destroyed with
--destroy-storage; a machine left without a unit, hosting no container,
becomes dying and its agents take it down. An iaas application is then
gone. A caas application is dead until its unit provisioner has deleted its
service and pods: it then clears the application's cluster resources and
the application goes. No prompt.

It prints a message, or with --format json or yaml what changed
(removed.applications, or dying.applications for a caas application
waiting for its unit provisioner; removed.units, dying.machines,
removed.storage, removed.filesystems, removed.volumes) with the
application as show-application prints it.`,
		Example: `  provisionctl remove-application gitlab -m k8s
  provisionctl remove-application gitlab --destroy-storage -m k8s
  provisionctl remove-application db --format json`,
		Args:              exactArgs("APP"),
		ValidArgsFunction: firstArg(a.completer(a.applicationNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var res params.RemoveApplicationResult
			if err := a.call(cmd.Context(), "RemoveApplication",
				params.RemoveApplicationArgs{Model: model, Application: pos[0], DestroyStorage: destroyStorage}, &res); err != nil {
				return err
			}
			m, err := a.applicationMutation(cmd.Context(), format, model, res.ApplicationStatus)
			if err != nil {
				return err
			}
			m.removed("applications").dying("applications").removed("units", res.RemovedUnits...).dying("machines", res.DyingMachines...)
			if res.Removed {
				m.removed("applications", res.Name)
			} else {
				m.dying("applications", res.Name)
			}
			removedStorageMutation(m, res.Storage)
			return a.writeMutation(cmd.Context(), format, model, m, func() {
				if len(res.RemovedUnits) > 0 {
					a.infof("Removed %s %s.", plural(len(res.RemovedUnits), "unit"), strings.Join(res.RemovedUnits, ", "))
				}
				a.storageMessage(res.Storage)
				a.machinesDyingMessage(res.DyingMachines)
				if res.Removed {
					a.infof("Removed application %q.", res.Name)
				} else {
					a.infof("Application %q is %s; it goes once its unit provisioner has deleted its pods.", res.Name, res.Life)
				}
			})
		},
	}
	cmd.Flags().BoolVar(&destroyStorage, "destroy-storage", false, "destroy the storage of the application's units instead of detaching it")
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

// machinesDyingMessage says which machines a removal left without a unit,
// now dying.
func (a *app) machinesDyingMessage(ids []string) {
	switch len(ids) {
	case 0:
	case 1:
		a.infof("Machine %s, left without a unit, is dying.", ids[0])
	default:
		a.infof("Machines %s, left without a unit, are dying.", strings.Join(ids, ", "))
	}
}

// applicationMutation starts the mutation of a verb that returns an
// application: its result is the application as show-application prints
// it (which needs the model's type, asked only for json and yaml).
func (a *app) applicationMutation(ctx context.Context, format formatFlag, model string, res params.ApplicationStatus) (*mutation, error) {
	m := newMutation()
	if format == formatTable {
		return m, nil
	}
	ms, err := a.resolveModel(ctx, model)
	if err != nil {
		return nil, err
	}
	m.Model, m.ModelUUID = ms.Name, ms.UUID
	return m.result(map[string]applicationDoc{res.Name: applicationDocOf(res, ms.Type == "caas")}), nil
}
