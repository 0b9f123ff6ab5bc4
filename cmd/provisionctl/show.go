package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs that show one kind of entity, as Juju's: machines, show-machine,
// units, show-unit, show-application. They read the model's status; json
// and yaml have status's shapes (Juju's, keyed by id).
func (a *app) addShowCommands(root *cobra.Command) {
	root.AddCommand(a.machinesCommand(), a.showMachineCommand(), a.unitsCommand(), a.showUnitCommand(),
		a.showApplicationCommand())
}

// machinesDoc is the json and yaml of machines and show-machine, as
// Juju's: {"model": NAME, "machines": {ID: ...}}.
type machinesDoc struct {
	Model    string                `json:"model"`
	Machines map[string]machineDoc `json:"machines"`
}

// unitsDoc is the json and yaml of units and show-unit: each unit with
// its application.
type unitsDoc struct {
	Model string                  `json:"model"`
	Units map[string]unitShownDoc `json:"units"`
}

type unitShownDoc struct {
	Application string `json:"application"`
	unitDoc
}

// applicationsDoc is the json and yaml of show-application.
type applicationsDoc struct {
	Model        string                    `json:"model"`
	Applications map[string]applicationDoc `json:"applications"`
}

// markedForRemoval is the message of a machine marked for removal in the
// tables.
const markedForRemoval = "marked for removal"

func machinesTable(ms []params.MachineStatus) *table {
	t := &table{header: []string{"MACHINE", "LIFE", "AGENT", "INSTANCE-ID", "INSTANCE", "BASE", "ADDRESSES", "MESSAGE"}, cutLast: true}
	for _, m := range ms {
		msg := m.InstanceStatus.Message
		if m.AgentStatus.Message != "" {
			msg = m.AgentStatus.Message
		}
		if m.MarkedForRemoval {
			msg = markedForRemoval
		}
		t.add(m.ID, m.Life, orDash(m.AgentStatus.Status), orDash(m.InstanceID), orDash(m.InstanceStatus.Status),
			orDash(m.Base), orDash(strings.Join(m.Addresses, ",")), msg)
	}
	return t
}

type unitRow struct {
	app  string
	unit params.UnitStatus
}

func unitsTable(rows []unitRow) *table {
	t := &table{header: []string{"UNIT", "LIFE", "MACHINE", "PROVIDER-ID", "ADDRESS", "WORKLOAD", "CONTAINER", "MESSAGE"}, cutLast: true}
	for _, r := range rows {
		u := r.unit
		msg := u.WorkloadStatus.Message
		if msg == "" {
			msg = u.ContainerStatus.Message
		}
		if msg == "" {
			msg = u.AgentStatus.Message
		}
		t.add(u.Name, u.Life, orDash(u.Machine), orDash(u.ProviderID), orDash(u.Address),
			orDash(u.WorkloadStatus.Status), orDash(u.ContainerStatus.Status), msg)
	}
	return t
}

func (a *app) machinesCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "machines",
		GroupID: "machines",
		Short:   "List a model's machines and containers",
		Long: `List a model's machines and their containers in id order: life, agent
status, instance id and status, base, addresses and the latest message, as
status shows them. json and yaml are Juju's: {"model", "machines": {ID:
...}} with containers nested under their hosts.`,
		Example: `  provisionctl machines
  provisionctl machines -m prod --format yaml`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.status(cmd, model)
			if err != nil {
				return err
			}
			doc := machinesDoc{Model: st.Model, Machines: map[string]machineDoc{}}
			for _, m := range st.Machines {
				doc.Machines[m.ID] = machineDocOf(m)
			}
			return write(a.stdout, format, doc, func(w io.Writer) error {
				all := allMachines(st.Machines)
				if len(all) == 0 {
					a.infof("No machines in model %q.", st.Model)
					return nil
				}
				return machinesTable(all).write(w)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) showMachineCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "show-machine ID...",
		GroupID: "machines",
		Short:   "Show machines in detail",
		Long: `Show machines (or containers) in detail, as Juju's show-machine: yaml by
default, {"model", "machines": {ID: ...}} with agent and instance status,
addresses, base, constraints, hardware, containers, volumes and units.
--format table shows them as machines does. An unknown id is an error.`,
		Example: `  provisionctl show-machine 0
  provisionctl show-machine 0 0/lxd/0 --format json`,
		Args:              minArgs(1, "ID..."),
		ValidArgsFunction: a.completeMachines,
		RunE: func(cmd *cobra.Command, ids []string) error {
			st, err := a.status(cmd, model)
			if err != nil {
				return err
			}
			all := allMachines(st.Machines)
			doc := machinesDoc{Model: st.Model, Machines: map[string]machineDoc{}}
			var shown []params.MachineStatus
			for _, id := range ids {
				i := slices.IndexFunc(all, func(m params.MachineStatus) bool { return m.ID == id })
				if i < 0 {
					return fmt.Errorf("machine %s not found in model %q", id, st.Model)
				}
				doc.Machines[id] = machineDocOf(all[i])
				shown = append(shown, all[i])
			}
			return write(a.stdout, format, doc, func(w io.Writer) error { return machinesTable(shown).write(w) })
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlagDefault(cmd, &format, formatYAML)
	return cmd
}

func (a *app) unitsCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "units",
		GroupID: "applications",
		Short:   "List a model's units",
		Long: `List a model's units by application and number: life, machine (iaas) or pod
provider id and address (caas), workload and container status and the
latest message, as status shows them. json and yaml: {"model", "units":
{NAME: ...}}, each with its application.`,
		Example: `  provisionctl units
  provisionctl units -m k8s --format json | jq -r '.units | keys[]'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.status(cmd, model)
			if err != nil {
				return err
			}
			doc, rows := unitsOf(st, nil)
			return write(a.stdout, format, doc, func(w io.Writer) error {
				if len(rows) == 0 {
					a.infof("No units in model %q.", st.Model)
					return nil
				}
				return unitsTable(rows).write(w)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

// unitsOf picks the units named (all when names is nil) from a status.
func unitsOf(st params.ModelStatus, names []string) (unitsDoc, []unitRow) {
	doc := unitsDoc{Model: st.Model, Units: map[string]unitShownDoc{}}
	var rows []unitRow
	for _, ap := range st.Applications {
		for _, u := range ap.Units {
			if names != nil && !slices.Contains(names, u.Name) {
				continue
			}
			doc.Units[u.Name] = unitShownDoc{Application: ap.Name, unitDoc: unitDocOf(u)}
			rows = append(rows, unitRow{ap.Name, u})
		}
	}
	return doc, rows
}

func (a *app) showUnitCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "show-unit UNIT...",
		GroupID: "applications",
		Short:   "Show units in detail",
		Long: `Show units in detail: yaml by default, {"model", "units": {NAME: ...}} with
the application, life, workload, agent and container status, machine or
pod, address and storage. --format table shows them as units does. An
unknown unit is an error.`,
		Example: `  provisionctl show-unit gitlab/0 -m k8s
  provisionctl show-unit db/0 db/1 --format json`,
		Args:              minArgs(1, "UNIT..."),
		ValidArgsFunction: a.completer(a.unitNames),
		RunE: func(cmd *cobra.Command, names []string) error {
			st, err := a.status(cmd, model)
			if err != nil {
				return err
			}
			doc, rows := unitsOf(st, names)
			for _, n := range names {
				if _, ok := doc.Units[n]; !ok {
					return fmt.Errorf("unit %q not found in model %q", n, st.Model)
				}
			}
			return write(a.stdout, format, doc, func(w io.Writer) error { return unitsTable(rows).write(w) })
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlagDefault(cmd, &format, formatYAML)
	return cmd
}

func (a *app) showApplicationCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "show-application APP...",
		GroupID: "applications",
		Short:   "Show applications in detail",
		Long: `Show applications in detail: yaml by default, {"model", "applications":
{NAME: ...}} as status shows them (charm, life, scale, status, units) with
trust, constraints and the storage and device constraints (sizes in MiB).
--format table shows the application and unit rows of status.`,
		Example: `  provisionctl show-application gitlab -m k8s
  provisionctl show-application db --format json | jq '.applications.db."storage-constraints"'`,
		Args:              minArgs(1, "APP..."),
		ValidArgsFunction: a.completer(a.applicationNames),
		RunE: func(cmd *cobra.Command, names []string) error {
			st, err := a.status(cmd, model)
			if err != nil {
				return err
			}
			doc := applicationsDoc{Model: st.Model, Applications: map[string]applicationDoc{}}
			sub := st
			sub.Applications = nil
			for _, n := range names {
				i := slices.IndexFunc(st.Applications, func(ap params.ApplicationStatus) bool { return ap.Name == n })
				if i < 0 {
					return fmt.Errorf("application %q not found in model %q", n, st.Model)
				}
				doc.Applications[n] = applicationDocOf(st.Applications[i], st.Type == "caas")
				sub.Applications = append(sub.Applications, st.Applications[i])
			}
			sub.Storage = params.StorageStatus{}
			return write(a.stdout, format, doc, func(w io.Writer) error {
				for i, t := range applicationTables(sub) {
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
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlagDefault(cmd, &format, formatYAML)
	return cmd
}
