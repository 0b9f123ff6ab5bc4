package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/size"
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
		Short:   "Show a model's machines, networking, applications, units and storage",
		Long: `Show a model: its machines and their containers (nested under their hosts
in json and yaml; in id order in the table), with life, agent status,
instance id and instance status (the provider's view), base, addresses and
the latest status message; then its subnets and the addresses in use; then
its applications (life, charm, scale, units, service address, operator
status), their units (machine, or pod provider id and address, workload
and container status) and the storage attached to them (instance, unit,
pool, size, filesystem and volume provider ids, status, mount point).

json and yaml show everything: constraints, placement, hardware, supported
container types (null until the machine agent reports them), volumes,
units, status data and times; applications with config trust, storage and
device constraints; every storage instance, filesystem and volume with its
attachments.`,
		Example: `  provisionctl status
  provisionctl status -m k8s
  provisionctl status -m prod --format json | jq '.machines[] | {id, "instance-id"}'
  provisionctl status -m k8s --format json | jq '.applications[].units[] | {name, "provider-id", address}'`,
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

	sections = append(sections, applicationTables(s)...)

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

// applicationTables are the status sections of applications, units and
// the storage attached to units; empty ones are left out.
func applicationTables(s params.ModelStatus) []*table {
	var out []*table
	apps := &table{header: []string{"APP", "LIFE", "CHARM", "SCALE", "UNITS", "ADDRESS", "STATUS"}, cutLast: true}
	units := &table{header: []string{"UNIT", "LIFE", "MACHINE", "PROVIDER-ID", "ADDRESS", "WORKLOAD", "CONTAINER", "MESSAGE"}, cutLast: true}
	for _, ap := range s.Applications {
		scale := "-"
		if s.Type == "caas" {
			scale = strconv.Itoa(ap.Scale)
		}
		st := ap.OperatorStatus.Status
		if ap.OperatorStatus.Message != "" {
			st += ": " + ap.OperatorStatus.Message
		}
		apps.add(ap.Name, ap.Life, ap.Charm, scale, strconv.Itoa(len(ap.Units)), orDash(strings.Join(ap.Addresses, ",")), st)
		for _, u := range ap.Units {
			msg := u.WorkloadStatus.Message
			if msg == "" {
				msg = u.ContainerStatus.Message
			}
			if msg == "" {
				msg = u.AgentStatus.Message
			}
			units.add(u.Name, u.Life, orDash(u.Machine), orDash(u.ProviderID), orDash(u.Address),
				orDash(u.WorkloadStatus.Status), orDash(u.ContainerStatus.Status), msg)
		}
	}
	if len(apps.rows) > 0 {
		out = append(out, apps)
	}
	if len(units.rows) > 0 {
		out = append(out, units)
	}
	stor := &table{header: []string{"STORAGE", "UNIT", "POOL", "SIZE", "FILESYSTEM", "VOLUME", "STATUS", "LOCATION"}, cutLast: true}
	for _, si := range s.Storage.Instances {
		pool, sz, fsID, volID, status, location := "-", "-", "-", "-", "-", ""
		for _, f := range s.Storage.Filesystems {
			if f.StorageID != si.ID {
				continue
			}
			pool, sz, fsID, status = orDash(f.Pool), size.FormatMiB(f.Size), orDash(f.ProviderID), orDash(f.Status.Status)
			if f.Attachment != nil {
				location = f.Attachment.MountPoint
			}
			for _, v := range s.Storage.Volumes {
				if v.ID == f.VolumeID && f.VolumeID != "" {
					volID = orDash(v.ProviderID)
				}
			}
		}
		unit := si.Unit
		if unit == "" {
			unit = "(detached)"
		}
		stor.add(si.ID, unit, pool, sz, fsID, volID, status, location)
	}
	if len(stor.rows) > 0 {
		out = append(out, stor)
	}
	return out
}
