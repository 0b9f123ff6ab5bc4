package modeladmin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func registerStatus(m *methods) {
	rpc.Handle(m, "Status", (*ModelAdmin).Status)
	rpc.Handle(m, "StatusAt", (*ModelAdmin).StatusAt)
}

// Status reports a model: its machines in id order, each with its
// containers nested, instance ids, agent and instance statuses, addresses,
// volumes and units; its spaces; its subnets with the addresses in use;
// its applications with their units (status_applications.go); its storage
// instances, filesystems and volumes.
// Every part is read from one view of the state (state.OneView): a change
// committed while Status runs shows in all of them or in none.
func (a *ModelAdmin) Status(ctx context.Context, args params.ModelArgs) (params.ModelStatus, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.ModelStatus{}, err
	}
	return a.modelStatus(ctx, m)
}

// modelStatus is Status of a resolved model, read in one view.
func (a *ModelAdmin) modelStatus(ctx context.Context, m state.Model) (params.ModelStatus, error) {
	var out params.ModelStatus
	err := a.st.OneView(ctx, func(st *state.State) error {
		v := *a
		v.st = st
		var err error
		out, err = v.modelStatusIn(ctx, m)
		return err
	})
	if err == nil {
		addPresence(a.presence, &out) // status_presence.go
	}
	return out, err
}

func (a *ModelAdmin) modelStatusIn(ctx context.Context, m state.Model) (params.ModelStatus, error) {
	out := params.ModelStatus{Model: m.Name, UUID: m.UUID, Type: string(m.Type), Life: string(m.Life),
		Machines: []params.MachineStatus{}}
	machines, err := a.st.Machines(ctx, m.UUID)
	if err != nil {
		return params.ModelStatus{}, err
	}
	addrs, err := a.st.IPAddresses(ctx, m.UUID)
	if err != nil {
		return params.ModelStatus{}, err
	}
	units, err := a.st.Units(ctx, m.UUID)
	if err != nil {
		return params.ModelStatus{}, err
	}
	// Machines come in id order, so a host precedes its containers.
	byID := map[string]*params.MachineStatus{}
	var order []string
	for _, mc := range machines {
		ms := machineStatus(mc)
		for _, ad := range addrs {
			if ad.MachineID == mc.ID && ad.State == state.AddressStateAllocated {
				ms.Addresses = append(ms.Addresses, ad.Value)
			}
		}
		for _, u := range units {
			if u.MachineID == mc.ID {
				ms.Units = append(ms.Units, u.Name)
			}
		}
		vols, err := a.st.MachineVolumes(ctx, m.UUID, mc.ID)
		if err != nil {
			return params.ModelStatus{}, err
		}
		for _, v := range vols {
			vs := params.VolumeStatus{ID: v.ID, Pool: v.Pool, Size: v.Size, Life: string(v.Life)}
			if v.Info != nil {
				vs.ProviderID = v.Info.VolumeID
			}
			for _, at := range v.Attachments {
				if at.Machine == mc.ID && at.Info != nil {
					vs.DeviceName = at.Info.DeviceName
				}
			}
			ms.Volumes = append(ms.Volumes, vs)
		}
		byID[mc.ID] = &ms
		order = append(order, mc.ID)
	}
	// Nest containers, deepest first, so each is complete when copied.
	for i := len(order) - 1; i >= 0; i-- {
		id := order[i]
		parent := byID[state.ParentID(id)]
		if parent == nil {
			continue
		}
		parent.Containers = append([]params.MachineStatus{*byID[id]}, parent.Containers...)
	}
	for _, id := range order {
		if state.ParentID(id) == "" || byID[state.ParentID(id)] == nil {
			out.Machines = append(out.Machines, *byID[id])
		}
	}
	spaces, subnets, err := a.spacesAndSubnets(ctx, m)
	if err != nil {
		return params.ModelStatus{}, err
	}
	out.Spaces = spaceInfos(spaces, subnets)
	if out.Subnets, err = a.subnetInfos(ctx, m); err != nil {
		return params.ModelStatus{}, err
	}

	if out.Applications, err = a.applicationsStatus(ctx, m); err != nil {
		return params.ModelStatus{}, err
	}
	if out.Storage, err = a.storageStatus(ctx, m); err != nil {
		return params.ModelStatus{}, err
	}

	return out, nil
}

// StatusAt reports a model as it was at a past revision or time (args.At),
// rebuilt from the history of commits (state.ViewAt): what Status reports,
// read in one past view, but the agents' presence (who was connected then
// is not kept). The model is named as it was then: one removed since is
// found. A point that is not a revision or a time, or is in the future,
// is not valid; one older than the history kept is not found, and says
// the oldest point kept.
func (a *ModelAdmin) StatusAt(ctx context.Context, args params.StatusAtArgs) (params.StatusAtResult, error) {
	for _, s := range []string{args.Model, args.At} {
		if len(s) > MaxHistoryBound {
			return params.StatusAtResult{}, errors.NewNotValid(nil, fmt.Sprintf("an argument of %d bytes: at most %d", len(s), MaxHistoryBound))
		}
	}
	if args.At == "" {
		return params.StatusAtResult{}, errors.NewNotValid(nil, "at is required: a revision (12345) or an RFC 3339 time (2026-01-02T15:04:05Z)")
	}
	rev, t, err := parseHistoryBound("at", args.At)
	if err != nil {
		return params.StatusAtResult{}, err
	}
	var out params.StatusAtResult
	err = a.st.ViewAt(ctx, rev, t, func(st *state.State, p state.PastPoint) error {
		v := *a
		v.st = st
		m, err := v.model(ctx, args.Model)
		if err != nil {
			return err
		}
		out.Status, err = v.modelStatusIn(ctx, m)
		out.Revision = p.Rev
		if !p.Time.IsZero() {
			out.Time = p.Time.UTC().Format(time.RFC3339Nano)
		}
		return err
	})
	if err != nil {
		return params.StatusAtResult{}, err
	}
	return out, nil
}

func machineStatus(m state.Machine) params.MachineStatus {
	ms := params.MachineStatus{
		ID: m.ID, Life: string(m.Life), Base: m.Base.String(), Series: m.Series,
		Constraints: m.Constraints.String(), Placement: m.Placement, InstanceID: m.InstanceID,
		DisplayName: m.DisplayName, Hardware: hardwareString(m.Hardware),
		AgentStatus: statusInfo(m.Status), InstanceStatus: statusInfo(m.InstanceStatus),
		AgentVersion: m.AgentVersion, Jobs: m.Jobs, MarkedForRemoval: m.MarkedForRemoval,
	}
	if m.ModificationStatus.Status != "" {
		ms.ModificationStatus = statusInfo(m.ModificationStatus)
	}
	if m.SupportedContainersKnown {
		sc := append([]string{}, m.SupportedContainers...)
		ms.SupportedContainers = &sc
	}
	return ms
}

func statusInfo(s state.Status) params.StatusInfo {
	out := params.StatusInfo{Status: s.Status, Message: s.Message, Data: facade.StatusData(s.Data)}
	if len(out.Data) == 0 {
		out.Data = nil
	}
	if !s.Since.IsZero() {
		out.Since = s.Since.UTC().Format(time.RFC3339)
	}
	return out
}

// hardwareString formats an instance's hardware as Juju's status does:
// "arch=amd64 cores=2 mem=4096M root-disk=8192M availability-zone=z1".
func hardwareString(h *state.HardwareCharacteristics) string {
	if h == nil {
		return ""
	}
	var out []string
	str := func(k string, v *string) {
		if v != nil && *v != "" {
			out = append(out, k+"="+*v)
		}
	}
	num := func(k string, v *uint64, unit string) {
		if v != nil {
			out = append(out, k+"="+strconv.FormatUint(*v, 10)+unit)
		}
	}
	str("arch", h.Arch)
	num("cores", h.CpuCores, "")
	num("cpu-power", h.CpuPower, "")
	num("mem", h.Mem, "M")
	num("root-disk", h.RootDisk, "M")
	str("root-disk-source", h.RootDiskSource)
	if h.Tags != nil && len(*h.Tags) > 0 {
		out = append(out, "tags="+strings.Join(*h.Tags, ","))
	}
	str("availability-zone", h.AvailabilityZone)
	str("virt-type", h.VirtType)
	return strings.Join(out, " ")
}
