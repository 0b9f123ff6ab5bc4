package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

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
		watch  time.Duration
		at     string
	)
	cmd := &cobra.Command{
		Use:     "status [--watch [INTERVAL] | --at REVISION|TIME]",
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
Storage left by a unit that went is listed with unit (detached), and a
filesystem or volume attached to nothing that belongs to no storage
instance (an iaas volume whose machine went) by its tag, with unit
(orphaned): both stay until remove-storage or remove-model
--destroy-storage / --release-storage takes them out.

A machine whose agent is not connected to the controller shows agent
status "down" ("agent is not communicating with the server"), as Juju's
status does, unless it is still pending, stopped or dead; json and yaml
give every machine's agent-presence (alive or down, since when it went)
and the model's provisioner-agent. When no provisioner agent (the
controller agent at the model's endpoint) is connected, the table says so
under the model.

json and yaml are shaped like "juju status --format yaml": maps keyed by
id (machines, containers, applications, units, storage, filesystems,
volumes) with Juju's keys (juju-status, machine-status, instance-id,
dns-name, ip-addresses, base, application-status, workload-status,
charm-name, charm-rev, scale, provider-id, address), so scripts written
for Juju port; provisiond's extra fields (life, supported-containers,
volumes, trust, storage-constraints, agent-presence, provisioner-agent,
spaces, subnets) have keys of their own. Sizes are MiB.

--watch redraws the status every INTERVAL (default 2s; "--watch 5s" or
"--watch=5s") until interrupted, as watch(1) would: on a terminal the
screen is cleared each time; elsewhere each snapshot follows the last (json:
one document a line, yaml: "---" between documents). A lost connection is
reported and retried at the next tick.

--at shows the model as it was at a past revision (as provisionctl history
prints them) or RFC 3339 time (the last commit made at or before it),
rebuilt from the controller's history: anything inside the history's
retention (provisiond --history-retention; show-controller says the
oldest point kept). It is the same report, in the same formats, but for
the agents' presence, which the history does not keep: machine agent
statuses show as they were recorded, never "down". The revision and the
time of the point shown go to stderr. A point older than the history kept
is refused with the oldest point kept (exit status 1); one in the future,
or not a revision or a time, as bad input (exit status 2).`,
		Example: `  provisionctl status
  provisionctl status -m k8s --watch
  provisionctl status -m prod --format yaml
  provisionctl status --format json | jq -r '.machines | to_entries[] | "\(.key) \(.value."instance-id")"'
  provisionctl status -m k8s --format json | jq '.applications.gitlab.units'
  provisionctl status --at 12345
  provisionctl status -m prod --at 2026-01-02T15:04:05Z --format yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("watch") && len(args) == 1 {
				d, err := time.ParseDuration(args[0])
				if err != nil || d <= 0 {
					return usagef("status --watch %q: want an interval such as 2s or 1m", args[0])
				}
				watch = d
				return nil
			}
			return exactArgs()(cmd, args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("at") {
				if cmd.Flags().Changed("watch") {
					return usagef("status: --at and --watch do not go together: the past does not change")
				}
				if at == "" {
					return usagef("status --at: want a revision (12345) or an RFC 3339 time (2026-01-02T15:04:05Z)")
				}
				var res params.StatusAtResult
				if err := a.call(cmd.Context(), "StatusAt", params.StatusAtArgs{Model: model, At: at}, &res); err != nil {
					return err
				}
				if res.Time != "" {
					a.infof("status as at revision %d (%s)", res.Revision, res.Time)
				} else {
					a.infof("status as at revision %d", res.Revision)
				}
				return writeStatus(a.stdout, format, res.Status)
			}
			if cmd.Flags().Changed("watch") {
				if watch <= 0 {
					return usagef("status --watch %s: want a positive interval", watch)
				}
				return a.watchStatus(cmd.Context(), model, format, watch)
			}
			var res params.ModelStatus
			if err := a.call(cmd.Context(), "Status", params.ModelArgs{Model: model}, &res); err != nil {
				return err
			}
			return writeStatus(a.stdout, format, res)
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	cmd.Flags().DurationVar(&watch, "watch", 0, "redraw every INTERVAL (default 2s) until interrupted")
	cmd.Flags().Lookup("watch").NoOptDefVal = "2s"
	cmd.Flags().StringVar(&at, "at", "", "show the model as it was at a REVISION or an RFC 3339 TIME (from the history)")
	return cmd
}

func writeStatus(w io.Writer, format formatFlag, res params.ModelStatus) error {
	return write(w, format, jujuStatusOf(res), func(w io.Writer) error { return statusTables(w, res) })
}

// watchStatus redraws status every interval until ctx ends.
func (a *app) watchStatus(ctx context.Context, model string, format formatFlag, interval time.Duration) error {
	tty := isTerminal(a.stdout)
	t := time.NewTicker(interval)
	defer t.Stop()
	for first := true; ; first = false {
		var res params.ModelStatus
		err := a.call(ctx, "Status", params.ModelArgs{Model: model}, &res)
		if ctx.Err() != nil {
			return nil
		}
		var buf bytes.Buffer
		if err == nil {
			err = writeStatus(&buf, format, res)
		}
		switch {
		case tty:
			fmt.Fprintf(a.stdout, "\033[H\033[2JEvery %s: provisionctl status -m %s    %s\n\n", interval, model, time.Now().Format(time.RFC3339))
		case format == formatYAML && !first:
			fmt.Fprintln(a.stdout, "---")
		case format == formatTable && !first:
			fmt.Fprintln(a.stdout)
		}
		if err != nil {
			if tty {
				fmt.Fprintf(a.stdout, "ERROR %v\n", err)
			}
			a.infof("ERROR %v (retrying every %s)", err, interval)
			if a.conn != nil && a.conn.Err() != nil {
				a.conn = nil // dial again at the next tick
			}
		} else if _, err := a.stdout.Write(buf.Bytes()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// statusTables writes the table form of status: one table per section,
// separated by blank lines; empty sections are left out.
func statusTables(w io.Writer, s params.ModelStatus) error {
	sections := []*table{{header: []string{"MODEL", "TYPE", "LIFE", "UUID"}, rows: [][]string{{s.Model, s.Type, s.Life, s.UUID}}}}
	if p := s.ProvisionerAgent; p != nil && p.Status != "alive" {
		// Only when it is down: nothing is provisioned meanwhile.
		sections = append(sections, &table{header: []string{"PROVISIONER-AGENT", "SINCE", "MESSAGE"}, cutLast: true,
			rows: [][]string{{p.Status, orDash(p.Since), "no provisioner agent is connected to this model"}}})
	}

	machines := machinesTable(allMachines(s.Machines))
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
// storage: the storage instances of units (detached ones too), then the
// orphaned filesystems and volumes (storage.go); empty ones are left out.
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
			unit = detachedWord
		}
		stor.add(si.ID, unit, pool, sz, fsID, volID, status, location)
	}
	// What belongs to no storage instance and is attached to nothing.
	fss, vols := orphanedStorage(s.Storage)
	for _, f := range fss {
		stor.add(storageTag("filesystem", f.ID), orphanedWord, orDash(f.Pool), sizeOrDash(f.Size), orDash(f.ProviderID),
			volumeProviderID(s.Storage, f.VolumeID), orDash(f.Status.Status), "")
	}
	for _, v := range vols {
		stor.add(storageTag("volume", v.ID), orphanedWord, orDash(v.Pool), sizeOrDash(v.Size), "-", orDash(v.ProviderID),
			orDash(v.Status.Status), "")
	}
	if len(stor.rows) > 0 {
		out = append(out, stor)
	}
	return out
}
