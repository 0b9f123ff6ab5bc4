package dashboard

import (
	"context"
	"fmt"
	"strings"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// modelInfo is an entry of the model list.
type modelInfo struct {
	UUID         string `json:"uuid"`
	Name         string `json:"name"`
	Type         string `json:"type"`
	Life         string `json:"life"`
	IsController bool   `json:"isController,omitempty"`
}

// Attention levels.
const (
	levelError = "error"
	levelWarn  = "warn"
)

// alert is something of a model in an error or stuck state.
type alert struct {
	Level   string `json:"level"` // levelError or levelWarn
	Kind    string `json:"kind"`  // "machine", "unit", "application", "volume", ...
	ID      string `json:"id"`
	Status  string `json:"status"` // the status or life that stands out
	Message string `json:"message,omitempty"`
	Since   string `json:"since,omitempty"` // RFC 3339
}

// snapshot is what a stream sends of its model.
type snapshot struct {
	Now    time.Time                `json:"now"` // the server's clock, for "since" durations
	Rev    uint64                   `json:"rev"`
	Model  modelInfo                `json:"model"`
	Status *params.ModelStatus      `json:"status,omitempty"`
	Pools  []params.StoragePoolInfo `json:"pools"`
	Alerts []alert                  `json:"alerts"`
	// Storage is the storage table (storage.go), laid out as provisionctl
	// status shows it.
	Storage []storageRow `json:"storage"`
	// Banner, when set, is the warning the page shows above the model:
	// no provisioner agent is connected to it while it has work waiting
	// for one.
	Banner *banner `json:"banner,omitempty"`
	// Error says why there is no status (the model was removed).
	Error string `json:"error,omitempty"`
}

// models lists the models a user may see: every model for a superuser,
// none for other users (they have no model access records yet; the API
// refuses them on model endpoints too).
func (d *Dashboard) models(ctx context.Context, u state.User) ([]modelInfo, error) {
	if u.Access != state.AccessSuperuser {
		return []modelInfo{}, nil
	}
	ms, err := d.cfg.State.Models(ctx)
	if err != nil {
		return nil, err
	}
	ctrl, err := d.cfg.State.Controller(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]modelInfo, 0, len(ms))
	for _, m := range ms {
		out = append(out, modelInfo{UUID: m.UUID, Name: m.Name, Type: string(m.Type), Life: string(m.Life),
			IsController: m.UUID == ctrl.ModelUUID})
	}
	return out, nil
}

// resolveModel finds a model by UUID or name; "" is the default model.
func (d *Dashboard) resolveModel(ctx context.Context, name string) (state.Model, error) {
	if name == "" {
		name = state.DefaultModelName
	}
	if state.IsValidUUID(name) {
		m, err := d.cfg.State.Model(ctx, name)
		if !jujuerrors.Is(err, jujuerrors.NotFound) {
			return m, err
		}
	}
	if state.ValidateModelName(name) != nil {
		return state.Model{}, jujuerrors.NotFoundf("model %q", name)
	}
	return d.cfg.State.ModelByName(ctx, name)
}

// snapshot reads model uuid as provisionctl status shows it, with its pools
// and what needs attention.
func (d *Dashboard) snapshot(ctx context.Context, uuid string) snapshot {
	out := snapshot{Now: d.cfg.Now().UTC(), Rev: d.cfg.State.Revision(), Pools: []params.StoragePoolInfo{}, Alerts: []alert{},
		Storage: []storageRow{}}
	m, err := d.cfg.State.Model(ctx, uuid)
	if err == nil {
		out.Model = modelInfo{UUID: m.UUID, Name: m.Name, Type: string(m.Type), Life: string(m.Life)}
		var st params.ModelStatus
		if st, err = d.cfg.Status(ctx, m); err == nil {
			out.Status = &st
			out.Pools, err = d.cfg.Pools(ctx, m)
		}
	}
	switch {
	case jujuerrors.Is(err, jujuerrors.NotFound):
		out.Model.UUID = uuid
		out.Error = "this model has been removed"
		out.Status = nil
	case err != nil:
		d.log.Error("dashboard: reading a model failed", "model", uuid, "err", err)
		out.Error = "the model could not be read (see the daemon's log)"
		out.Status = nil
	}
	if out.Pools == nil {
		out.Pools = []params.StoragePoolInfo{}
	}
	if out.Status != nil {
		out.Alerts = alerts(out.Status)
		out.Storage = storageRows(out.Status, out.Alerts)
		out.Banner = provisionerBanner(out.Status)
	}
	return out
}

// banner is a warning about the whole model.
type banner struct {
	Message string `json:"message"`
	Since   string `json:"since,omitempty"` // RFC 3339: when the agent went, if known
}

// provisionerBanner warns when the model's provisioner agent is down
// (params.ModelStatus.ProvisionerAgent) while the model has work waiting
// for it: top-level machines to start (alive, no instance) or to stop
// (dead), Kubernetes applications whose units do not match their scale,
// or dying ones to remove. Containers are their host agent's work. nil
// when there is nothing to warn about.
func provisionerBanner(st *params.ModelStatus) *banner {
	if st.ProvisionerAgent == nil || st.ProvisionerAgent.Status != "down" {
		return nil
	}
	var start, stop, scale, remove int
	for _, m := range st.Machines {
		switch {
		case m.Life == "alive" && m.InstanceID == "":
			start++
		case m.Life == "dead":
			stop++
		}
	}
	if st.Type == "caas" {
		for _, a := range st.Applications {
			switch {
			case a.Life != "alive":
				remove++
			case len(a.Units) != a.Scale:
				scale++
			}
		}
	}
	var work []string
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			work = append(work, "1 "+one)
		case n > 1:
			work = append(work, fmt.Sprintf("%d %s", n, many))
		}
	}
	count(start, "machine to start", "machines to start")
	count(stop, "machine to stop", "machines to stop")
	count(scale, "application to scale", "applications to scale")
	count(remove, "application to remove", "applications to remove")
	if len(work) == 0 {
		return nil
	}
	return &banner{
		Message: "No provisioner agent is connected to this model, and it has work waiting: " + strings.Join(work, ", ") + ".",
		Since:   st.ProvisionerAgent.Since,
	}
}

// Status values that stand out. Anything else (started, running, active,
// attached, ...) is fine, or in progress without being stuck.
var (
	errorStatuses = map[string]bool{
		"error": true, "provisioning error": true, "down": true, "lost": true, "failed": true,
		"blocked": true, "terminated": true,
	}
	warnStatuses = map[string]bool{
		"pending": true, "allocating": true, "waiting": true, "provisioning": true,
		"attaching": true, "detaching": true, "unknown": true,
	}
)

func statusLevel(s string) string {
	switch {
	case errorStatuses[s]:
		return levelError
	case warnStatuses[s]:
		return levelWarn
	}
	return ""
}

// alerts lists what of st is in an error or stuck state: a status that
// stands out (the worst of an entity's statuses, errors first) or a life
// other than alive.
func alerts(st *params.ModelStatus) []alert {
	out := []alert{}
	var errs, warns []alert
	add := func(kind, id, life string, statuses ...params.StatusInfo) {
		var best *alert
		for _, s := range statuses {
			lv := statusLevel(s.Status)
			if lv == "" || (best != nil && (best.Level == levelError || lv == levelWarn)) {
				continue
			}
			best = &alert{Level: lv, Kind: kind, ID: id, Status: s.Status, Message: s.Message, Since: s.Since}
		}
		if best == nil && (life == "dying" || life == "dead") {
			best = &alert{Level: levelWarn, Kind: kind, ID: id, Status: life}
		}
		if best == nil {
			return
		}
		if best.Level == levelError {
			errs = append(errs, *best)
		} else {
			warns = append(warns, *best)
		}
	}
	if st.Life == "dying" || st.Life == "dead" {
		add("model", st.Model, st.Life)
	}
	var machine func(m params.MachineStatus)
	machine = func(m params.MachineStatus) {
		add("machine", m.ID, m.Life, m.AgentStatus, m.InstanceStatus, m.ModificationStatus)
		for _, c := range m.Containers {
			machine(c)
		}
	}
	for _, m := range st.Machines {
		machine(m)
	}
	for _, a := range st.Applications {
		add("application", a.Name, a.Life, a.OperatorStatus)
		for _, u := range a.Units {
			add("unit", u.Name, u.Life, u.AgentStatus, u.WorkloadStatus, u.ContainerStatus)
		}
	}
	// Storage left behind is flagged until an operator takes it out
	// (remove-storage, remove-model --destroy-storage/--release-storage):
	// an instance attached to no unit, a filesystem or volume attached to
	// nothing that belongs to no instance.
	left := func(kind, id, what, msg string) {
		warns = append(warns, alert{Level: levelWarn, Kind: kind, ID: id, Status: what, Message: msg})
	}
	for _, f := range st.Storage.Filesystems {
		if f.Orphaned {
			left("filesystem", f.ID, "orphaned", "attached to nothing, of no storage instance")
			continue
		}
		add("filesystem", f.ID, f.Life, f.Status)
	}
	for _, v := range st.Storage.Volumes {
		if v.Orphaned {
			left("volume", v.ID, "orphaned", "attached to nothing, of no storage instance")
			continue
		}
		add("volume", v.ID, v.Life, v.Status)
	}
	for _, s := range st.Storage.Instances {
		if s.Unit == "" && s.Life == "alive" {
			left("storage", s.ID, "detached", "attached to no unit")
			continue
		}
		add("storage", s.ID, s.Life)
	}
	for _, s := range st.Subnets {
		add("subnet", s.CIDR, s.Life)
	}
	out = append(out, errs...)
	return append(out, warns...)
}

// String is an alert as one line (the log, tests).
func (a alert) String() string {
	s := fmt.Sprintf("%s %s %s: %s", a.Level, a.Kind, a.ID, a.Status)
	if a.Message != "" {
		s += ": " + a.Message
	}
	return s
}
