package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about machines: add-machine, remove-machine.
func (a *app) addMachineCommands(root *cobra.Command) {
	root.AddCommand(a.addMachineCommand(), a.removeMachineCommand())
}

// maxArgs is cobra.MaximumNArgs reporting a usage error.
func maxArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return usagef("%s takes at most %d argument(s) (%s), got %d", cmd.Name(), n, names, len(args))
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs reporting a usage error.
func minArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s needs at least %d argument(s) (%s), got %d", cmd.Name(), n, names, len(args))
		}
		return nil
	}
}

func (a *app) addMachineCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		args   params.AddMachinesArgs
	)
	cmd := &cobra.Command{
		Use:     "add-machine [PLACEMENT] [--base OS@CHANNEL] [--constraints C] [--count N] [--disks POOL,SIZE,COUNT]...",
		GroupID: "machines",
		Short:   "Add machines or containers",
		Long: `Add machines to an iaas model for the provisioner to start. PLACEMENT is
empty (new machines), TYPE:ID (containers of type lxd, kvm or lxc on machine
ID, which may itself be a container) or zone=ZONE (an availability zone
that one of the model's subnets names).

--base is Juju's OS@CHANNEL (ubuntu@22.04, ubuntu@24.04/edge); without it
the model's default applies. --constraints are Juju's, space-separated:
arch, container, cores, cpu-power, mem, root-disk (sizes: 512M, 1G, 1GiB,
1.5T; MiB when no unit), root-disk-source, tags, instance-type, instance-role, spaces
(^SPACE excludes one), virt-type, zones, allocate-public-ip, image-id.
--disks asks for volumes for each machine, as POOL,SIZE,COUNT in any order
(a pool of the model or a provider type such as loop; the default block
pool when none; 1G and 1 when not given); repeatable.

A container can be added to a machine whose agent has not yet reported the
container types it supports; once it has, other types are refused.

It prints the new machine ids, one a line (json/yaml: what changed, with
added.machines). Everything is checked before the first machine is added:
bad input adds nothing.`,
		Example: `  provisionctl add-machine
  provisionctl add-machine --base ubuntu@22.04 --constraints "cores=2 mem=4G" --count 3
  provisionctl add-machine lxd:3
  provisionctl add-machine zone=zone-a --disks loop,10G,2 --format json`,
		Args: maxArgs(1, "PLACEMENT"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if len(pos) == 1 {
				args.Placement = pos[0]
			}
			if args.Count < 1 {
				return usagef("--count %d: want at least 1", args.Count)
			}
			for _, d := range args.Disks {
				if err := checkStorageSizes("--disks", d); err != nil {
					return err
				}
			}
			args.Model = model
			var res params.AddMachinesResult
			if err := a.call(cmd.Context(), "AddMachines", args, &res); err != nil {
				return err
			}
			if format == formatTable {
				for _, id := range res.Machines {
					if _, err := fmt.Fprintln(a.stdout, id); err != nil {
						return err
					}
				}
				return nil
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().added("machines", res.Machines...), nil)
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().StringVar(&args.Base, "base", "", "the OS, as OS@CHANNEL (ubuntu@22.04)")
	cmd.Flags().StringVar(&args.Constraints, "constraints", "", `constraints in Juju's syntax ("cores=2 mem=4G")`)
	cmd.Flags().IntVarP(&args.Count, "count", "n", 1, "how many machines to add")
	cmd.Flags().StringArrayVar(&args.Disks, "disks", nil, "volumes for each machine: POOL,SIZE,COUNT (repeatable)")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) removeMachineCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		args   params.RemoveMachinesArgs
	)
	cmd := &cobra.Command{
		Use:     "remove-machine ID... [--force [--no-wait]]",
		GroupID: "machines",
		Short:   "Remove machines or containers",
		Long: `Make machines (or containers) dying: their agents and the provisioner stop
and remove them. All of them or none: a machine that hosts units or
containers is refused, and then nothing changes, unless --force, which makes
its containers dying with it and removes the units on them (no unit agent
would take a dying unit off its machine). Machines already dying are left
as they are. The controller machine cannot be removed.

--no-wait (with --force, as in Juju) waits for nobody: the machines, their
containers and the units on them are removed at once, deepest containers
first, and their addresses released. Instances the provisioner started are
left to the cloud: stop them there.

With --format json or yaml it prints what changed: dying.machines, the
machines that became dying (removed.machines with --no-wait); with the
table format a message on stderr.`,
		Example: `  provisionctl remove-machine 3
  provisionctl remove-machine 3/lxd/0 4
  provisionctl remove-machine 3 --force --format json
  provisionctl remove-machine 3 --force --no-wait`,
		Args:              minArgs(1, "ID..."),
		ValidArgsFunction: a.completeMachines,
		RunE: func(cmd *cobra.Command, ids []string) error {
			if args.NoWait && !args.Force {
				return usagef("--no-wait needs --force: it removes what the machines host")
			}
			args.Model, args.Machines = model, ids
			var res params.RemoveMachinesResult
			if err := a.call(cmd.Context(), "RemoveMachines", args, &res); err != nil {
				return err
			}
			m := newMutation().dying("machines", res.Dying...).removed("machines", res.Removed...)
			return a.writeMutation(cmd.Context(), format, model, m, func() {
				switch {
				case len(res.Removed) > 0:
					a.infof("Removed %s %s.", plural(len(res.Removed), "machine"), strings.Join(res.Removed, ", "))
				case len(res.Dying) == 0:
					a.infof("Nothing to do: already dying.")
				case len(res.Dying) == 1:
					a.infof("Machine %s is dying.", res.Dying[0])
				default:
					a.infof("Machines %s are dying.", strings.Join(res.Dying, ", "))
				}
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().BoolVar(&args.Force, "force", false, "also make the machines' containers dying and remove their units")
	cmd.Flags().BoolVar(&args.NoWait, "no-wait", false, "with --force: remove at once, without waiting for agents")
	addFormatFlag(cmd, &format)
	return cmd
}
