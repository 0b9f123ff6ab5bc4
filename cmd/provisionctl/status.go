package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"provisiond/rpc/params"
)

// Verbs that observe: status (watch is in watch.go).
func (a *app) addStatusCommands(root *cobra.Command) {
	root.AddCommand(a.statusCommand())
}

func (a *app) statusCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "status",
		GroupID: "observe",
		Short:   "Show a model's machines, containers and networking",
		Long: `Show a model: its machines and their containers (nested under their hosts
in json and yaml; in id order in the table), with life, agent status,
instance id and instance status (the provider's view), base, addresses and
the latest status message; then its subnets and the addresses in use.

json and yaml show everything: constraints, placement, hardware, supported
container types (null until the machine agent reports them), volumes,
units, status data and times.`,
		Example: `  provisionctl status
  provisionctl status -m prod --format json | jq '.machines[] | {id, "instance-id"}'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res params.ModelStatus
			if err := a.call(cmd.Context(), "Status", params.ModelArgs{Model: model}, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(w io.Writer) error { return statusTables(w, res) })
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

// statusTables writes the table form of status: one table per section,
// separated by blank lines; empty sections are left out.
func statusTables(w io.Writer, s params.ModelStatus) error {
	sections := []*table{{header: []string{"MODEL", "TYPE", "LIFE", "UUID"}, rows: [][]string{{s.Model, s.Type, s.Life, s.UUID}}}}

	machines := &table{header: []string{"MACHINE", "LIFE", "AGENT", "INSTANCE-ID", "INSTANCE", "BASE", "ADDRESSES", "MESSAGE"}, cutLast: true}
	var walk func([]params.MachineStatus)
	walk = func(ms []params.MachineStatus) {
		for _, m := range ms {
			msg := m.InstanceStatus.Message
			if m.AgentStatus.Message != "" {
				msg = m.AgentStatus.Message
			}
			machines.add(m.ID, m.Life, orDash(m.AgentStatus.Status), orDash(m.InstanceID), orDash(m.InstanceStatus.Status),
				orDash(m.Base), orDash(strings.Join(m.Addresses, ",")), msg)
			walk(m.Containers)
		}
	}
	walk(s.Machines)
	if len(machines.rows) > 0 {
		sections = append(sections, machines)
	}

	if len(s.Subnets) > 0 {
		sections = append(sections, subnetsTable(s.Subnets))
		addrs := &table{header: []string{"ADDRESS", "SUBNET", "MACHINE", "STATE", "MAC"}}
		for _, sn := range s.Subnets {
			for _, ad := range sn.Addresses {
				addrs.add(ad.Value, ad.Subnet, orDash(ad.Machine), ad.State, orDash(ad.MACAddress))
			}
		}
		if len(addrs.rows) > 0 {
			sections = append(sections, addrs)
		}
	}

	// Applications, units and storage (CAAS): the CAAS work adds their
	// sections here.

	for i, t := range sections {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := t.write(w); err != nil {
			return err
		}
	}
	return nil
}
