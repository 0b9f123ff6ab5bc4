package main

import (
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about networking: add-space, spaces, remove-space, add-subnet,
// subnets, remove-subnet.
func (a *app) addNetworkCommands(root *cobra.Command) {
	root.AddCommand(a.addSpaceCommand(), a.spacesCommand(), a.removeSpaceCommand(), a.addSubnetCommand(),
		a.subnetsCommand(), a.removeSubnetCommand())
}

// orDash shows an empty cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) addSpaceCommand() *cobra.Command {
	var (
		format     formatFlag
		model      string
		providerID string
	)
	cmd := &cobra.Command{
		Use:     "add-space NAME [--provider-id ID]",
		GroupID: "network",
		Short:   "Add a network space",
		Long: `Add a space, a named set of subnets that machines' "spaces" constraints and
applications' endpoint bindings refer to. NAME is lowercase letters, digits
and hyphens. With --format json or yaml it prints what changed
(added.spaces) with the space as result; with the table format a message
on stderr.`,
		Example: `  provisionctl add-space db
  provisionctl add-space public --provider-id sp-0a1b --format json`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var res params.SpaceInfo
			if err := a.call(cmd.Context(), "AddSpace", params.AddSpaceArgs{Model: model, Name: args[0], ProviderID: providerID}, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().added("spaces", res.Name).result(res), func() {
				a.infof("Added space %q.", res.Name)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().StringVar(&providerID, "provider-id", "", "the provider's id of the space")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) spacesCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "spaces",
		GroupID: "network",
		Short:   "List a model's spaces",
		Long:    `List a model's spaces, by name, with their provider ids and subnets.`,
		Example: `  provisionctl spaces
  provisionctl spaces --format json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res params.SpacesResult
			if err := a.call(cmd.Context(), "Spaces", params.ModelArgs{Model: model}, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(w io.Writer) error {
				if len(res.Spaces) == 0 {
					a.infof("No spaces.")
					return nil
				}
				t := table{header: []string{"NAME", "PROVIDER-ID", "SUBNETS"}}
				for _, s := range res.Spaces {
					t.add(s.Name, orDash(s.ProviderID), orDash(strings.Join(s.Subnets, ",")))
				}
				return t.write(w)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) addSubnetCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
		args   params.AddSubnetArgs
	)
	cmd := &cobra.Command{
		Use:     "add-subnet CIDR --space S --zone Z --provider-id ID [--vlan N] [--allocatable-range LOW-HIGH]",
		GroupID: "network",
		Short:   "Add a subnet the built-in provider allocates from",
		Long: `Add a subnet to a model. Hosts in its availability zones get an interface
on it, and containers on them get addresses from its allocatable range.

CIDR is in canonical form (10.0.0.0/24, not 10.0.0.1/24) and may not overlap
another subnet of the model. --space (an existing space), --zone (one or
more: repeat it or separate with commas) and --provider-id (unique in the
model) are required. --vlan is 0 (none) to 4094. --allocatable-range
LOW-HIGH must lie inside the CIDR; without it the subnet hands out no
container addresses.

With --format json or yaml it prints what changed (added.subnets) with the
subnet as result; with the table format a message on stderr.`,
		Example: `  provisionctl add-subnet 10.0.0.0/24 --space db --zone zone-a --provider-id subnet-0 \
      --allocatable-range 10.0.0.10-10.0.0.200
  provisionctl add-subnet 192.168.0.0/16 --space public --zone a,b --provider-id subnet-1 --vlan 42`,
		Args: exactArgs("CIDR"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if err := requireFlags(cmd, "space", "zone", "provider-id"); err != nil {
				return err
			}
			args.Model, args.CIDR = model, pos[0]
			var res params.SubnetInfo
			if err := a.call(cmd.Context(), "AddSubnet", args, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().added("subnets", res.CIDR).result(res), func() {
				a.infof("Added subnet %s in space %q.", res.CIDR, res.Space)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	cmd.Flags().StringVar(&args.Space, "space", "", "the space the subnet is in (required)")
	_ = cmd.RegisterFlagCompletionFunc("space", a.completer(a.spaceNames))
	cmd.Flags().StringSliceVar(&args.Zones, "zone", nil, "availability zones (required; repeatable, or comma-separated)")
	cmd.Flags().StringVar(&args.ProviderID, "provider-id", "", "the provider's id of the subnet (required)")
	cmd.Flags().IntVar(&args.VLANTag, "vlan", 0, "VLAN tag, 0 for none")
	cmd.Flags().StringVar(&args.AllocatableRange, "allocatable-range", "", "LOW-HIGH: the addresses containers get")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) subnetsCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "subnets",
		GroupID: "network",
		Short:   "List a model's subnets and the addresses in use",
		Long: `List a model's subnets by CIDR: space, zones, provider id, VLAN, allocatable
range and how many of its addresses are in use. json and yaml list the
addresses themselves (value, machine, state, interface, MAC).`,
		Example: `  provisionctl subnets
  provisionctl subnets --format json | jq '.subnets[].addresses'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res params.SubnetsResult
			if err := a.call(cmd.Context(), "Subnets", params.ModelArgs{Model: model}, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(w io.Writer) error {
				if len(res.Subnets) == 0 {
					a.infof("No subnets.")
					return nil
				}
				return subnetsTable(res.Subnets).write(w)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func subnetsTable(subnets []params.SubnetInfo) *table {
	t := &table{header: []string{"SUBNET", "SPACE", "ZONES", "PROVIDER-ID", "VLAN", "RANGE", "IN-USE"}}
	for _, s := range subnets {
		rng := "-"
		if s.AllocatableIPLow != "" {
			rng = s.AllocatableIPLow + "-" + s.AllocatableIPHigh
		}
		vlan := "-"
		if s.VLANTag != 0 {
			vlan = strconv.Itoa(s.VLANTag)
		}
		t.add(s.CIDR, orDash(s.Space), orDash(strings.Join(s.Zones, ",")), orDash(s.ProviderID), vlan, rng,
			strconv.Itoa(len(s.Addresses)))
	}
	return t
}

func (a *app) removeSpaceCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "remove-space NAME",
		GroupID: "network",
		Short:   "Remove a network space",
		Long: `Remove a space from a model. A space that still holds subnets, or that the
constraints of a machine, an application or the model name, or an
application's endpoint bindings, is kept: remove or change those first.

With --format json or yaml it prints what changed (removed.spaces) with
the removed space as result; with the table format a message on stderr.`,
		Example: `  provisionctl remove-space dmz
  provisionctl remove-space db -m prod --format json`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: firstArg(a.completer(a.spaceNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var res params.SpaceInfo
			if err := a.call(cmd.Context(), "RemoveSpace", params.RemoveSpaceArgs{Model: model, Name: pos[0]}, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().removed("spaces", res.Name).result(res), func() {
				a.infof("Removed space %q.", res.Name)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) removeSubnetCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "remove-subnet CIDR",
		GroupID: "network",
		Short:   "Remove a subnet",
		Long: `Remove a subnet from a model. A subnet with addresses in use (allocated to
containers, or marked unavailable) is kept: remove the machines holding
them first.

With --format json or yaml it prints what changed (removed.subnets) with
the removed subnet as result; with the table format a message on stderr.`,
		Example: `  provisionctl remove-subnet 10.0.0.0/24
  provisionctl remove-subnet 192.168.0.0/16 -m prod --format json`,
		Args:              exactArgs("CIDR"),
		ValidArgsFunction: firstArg(a.completer(a.subnetCIDRs)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var res params.SubnetInfo
			if err := a.call(cmd.Context(), "RemoveSubnet", params.RemoveSubnetArgs{Model: model, CIDR: pos[0]}, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().removed("subnets", res.CIDR).result(res), func() {
				a.infof("Removed subnet %s.", res.CIDR)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}
