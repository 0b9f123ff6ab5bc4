package provisioner

import (
	"context"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Life returns the life of each machine.
func (p *Provisioner) Life(ctx context.Context, args params.Entities) (params.LifeResults, error) {
	return params.LifeResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.LifeResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.LifeResult{}, err
		}
		return params.LifeResult{Life: lifeString(m.Life)}, nil
	})}, nil
}

// Remove removes each dead machine, the valid items in one transaction.
func (p *Provisioner) Remove(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	var ms []state.Machine
	return facade.BulkWrite(ctx, args.Entities, func(e params.Entity) (string, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return "", err
		}
		if m.Life == state.Alive {
			return "", errors.Errorf("cannot remove entity %q: still alive", e.Tag)
		}
		ms = append(ms, m)
		return m.ID, nil
	}, func(ids []string) []error {
		released, errs := p.st.RemoveMachines(ctx, p.model, ids)
		for i, err := range errs {
			if err == nil {
				p.releaseAtProvider(ctx, ms[i], released[i])
			}
		}
		return errs
	}), nil
}

// EnsureDead makes each machine dead, the valid items in one transaction.
func (p *Provisioner) EnsureDead(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Entities, func(e params.Entity) (string, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		return m.ID, err
	}, func(ids []string) []error { return p.st.EnsureMachinesDead(ctx, p.model, ids) }), nil
}

// SetPasswords sets each machine's agent password, the valid items in one
// transaction.
func (p *Provisioner) SetPasswords(ctx context.Context, args params.EntityPasswords) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Changes, func(c params.EntityPassword) (state.MachinePassword, error) {
		m, err := p.machine(ctx, c.Tag, machineTags)
		return state.MachinePassword{ID: m.ID, Password: c.Password}, err
	}, func(ws []state.MachinePassword) []error { return p.st.SetMachinePasswords(ctx, p.model, ws) }), nil
}

// InstanceId returns each machine's instance id.
func (p *Provisioner) InstanceId(ctx context.Context, args params.Entities) (params.StringResults, error) {
	return params.StringResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.StringResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.StringResult{}, err
		}
		if !m.Provisioned() {
			return params.StringResult{}, notProvisioned(m.ID)
		}
		return params.StringResult{Result: m.InstanceID}, nil
	})}, nil
}

// AvailabilityZone returns each machine's availability zone ("" when its
// hardware names none).
func (p *Provisioner) AvailabilityZone(ctx context.Context, args params.Entities) (params.StringResults, error) {
	return params.StringResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.StringResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.StringResult{}, err
		}
		if m.Hardware != nil && m.Hardware.AvailabilityZone != nil {
			return params.StringResult{Result: *m.Hardware.AvailabilityZone}, nil
		}
		return params.StringResult{}, nil
	})}, nil
}

// KeepInstance returns each machine's keep-instance flag.
func (p *Provisioner) KeepInstance(ctx context.Context, args params.Entities) (params.BoolResults, error) {
	return params.BoolResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.BoolResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.BoolResult{}, err
		}
		return params.BoolResult{Result: m.KeepInstance}, nil
	})}, nil
}

// Constraints returns each machine's constraints.
func (p *Provisioner) Constraints(ctx context.Context, args params.Entities) (params.ConstraintsResults, error) {
	return params.ConstraintsResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.ConstraintsResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.ConstraintsResult{}, err
		}
		return params.ConstraintsResult{Constraints: toValue(m.Constraints)}, nil
	})}, nil
}

func toValue(c state.Constraints) params.Value {
	return params.Value{
		Arch: c.Arch, Container: c.Container, CpuCores: c.Cores, CpuPower: c.CpuPower, Mem: c.Mem,
		RootDisk: c.RootDisk, RootDiskSource: c.RootDiskSource, Tags: c.Tags, InstanceRole: c.InstanceRole,
		InstanceType: c.InstanceType, Spaces: c.Spaces, VirtType: c.VirtType, Zones: c.Zones,
		AllocatePublicIP: c.AllocatePublicIP, ImageID: c.ImageID,
	}
}

// Status returns each machine's agent status.
func (p *Provisioner) Status(ctx context.Context, args params.Entities) (params.StatusResults, error) {
	return p.statuses(ctx, args, entityTags, func(m state.Machine) state.Status { return m.Status }), nil
}

// InstanceStatus returns each machine's instance status.
func (p *Provisioner) InstanceStatus(ctx context.Context, args params.Entities) (params.StatusResults, error) {
	return p.statuses(ctx, args, machineTags, func(m state.Machine) state.Status { return m.InstanceStatus }), nil
}

// statuses returns one kind of status of each machine (its tag taken by
// rule), without the id and life StatusResult also carries.
func (p *Provisioner) statuses(ctx context.Context, args params.Entities, rule tagRule, status func(state.Machine) state.Status) params.StatusResults {
	return params.StatusResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.StatusResult, error) {
		m, err := p.machine(ctx, e.Tag, rule)
		if err != nil {
			return params.StatusResult{}, err
		}
		r := statusResult(m, status(m))
		r.Id, r.Life = "", ""
		return r, nil
	})}
}

// SetStatus sets each machine's agent status, the valid items in one
// transaction.
func (p *Provisioner) SetStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return p.setStatuses(ctx, args.Entities, state.AgentStatus, entityTags), nil
}

// SetInstanceStatus sets each machine's instance status; "error" and
// "provisioning error" set the agent status to error as well, in the same
// transaction (state's SetMachineStatus).
func (p *Provisioner) SetInstanceStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return p.setStatuses(ctx, args.Entities, state.InstanceStatus, machineTags), nil
}

// SetModificationStatus sets each machine's modification status.
func (p *Provisioner) SetModificationStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return p.setStatuses(ctx, args.Entities, state.ModificationStatus, machineTags), nil
}

// setStatuses sets one kind of status of each machine (its tag taken by
// rule; the write checks that the machine exists): the valid items in one
// transaction.
func (p *Provisioner) setStatuses(ctx context.Context, items []params.EntityStatusArgs, kind state.StatusKind, rule tagRule) params.ErrorResults {
	return facade.BulkWrite(ctx, items, func(a params.EntityStatusArgs) (state.MachineStatusArg, error) {
		id, err := p.machineID(a.Tag, rule)
		return state.MachineStatusArg{ID: id, Kind: kind, Status: state.Status{Status: a.Status, Message: a.Info, Data: a.Data}}, err
	}, func(ws []state.MachineStatusArg) []error { return p.st.SetMachineStatuses(ctx, p.model, ws) })
}

// MachinesWithTransientErrors lists the reachable, unprovisioned machines
// whose status (v11: instance status "error" or "provisioning error";
// 2015: agent status "error") has data transient=true, sorted by id.
func (p *Provisioner) MachinesWithTransientErrors(ctx context.Context) (params.StatusResults, error) {
	ms, err := p.st.Machines(ctx, p.model)
	if err != nil {
		return params.StatusResults{}, err
	}
	res := params.StatusResults{Results: []params.StatusResult{}}
	for _, m := range ms {
		if !p.ctx.CanAccessMachine(m.Tag()) || m.Provisioned() {
			continue
		}
		s := m.InstanceStatus
		ok := s.Status == "error" || s.Status == "provisioning error"
		if p.v1 {
			s = m.Status
			ok = s.Status == "error"
		}
		if transient, _ := s.Data["transient"].(bool); !ok || !transient {
			continue
		}
		r := statusResult(m, s)
		r.Since = nil
		res.Results = append(res.Results, r)
	}
	return res, nil
}

// SetSupportedContainers records the container types each machine
// supports, the valid items in one transaction.
func (p *Provisioner) SetSupportedContainers(ctx context.Context, args params.MachineContainersParams) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Params, func(a params.MachineContainers) (state.MachineContainers, error) {
		m, err := p.machine(ctx, a.MachineTag, machineTags)
		return state.MachineContainers{ID: m.ID, Types: a.ContainerTypes}, err
	}, func(ws []state.MachineContainers) []error {
		return p.st.SetMachinesSupportedContainers(ctx, p.model, ws)
	}), nil
}

// SupportedContainers returns the container types each machine supports.
func (p *Provisioner) SupportedContainers(ctx context.Context, args params.Entities) (params.MachineContainerResults, error) {
	return params.MachineContainerResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.MachineContainerResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.MachineContainerResult{ContainerTypes: []string{}}, err
		}
		return params.MachineContainerResult{ContainerTypes: cloneStrings(m.SupportedContainers),
			Determined: m.SupportedContainersKnown}, nil
	})}, nil
}

// MarkMachinesForRemoval marks each dead machine for removal, the valid
// items in one transaction.
func (p *Provisioner) MarkMachinesForRemoval(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Entities, func(e params.Entity) (string, error) {
		m, err := p.machine(ctx, e.Tag, machineTagsParseErrors)
		return m.ID, err
	}, func(ids []string) []error { return p.st.MarkMachinesForRemoval(ctx, p.model, ids) }), nil
}

// SetCharmProfiles records the LXD profiles applied to each machine, the
// valid items in one transaction.
func (p *Provisioner) SetCharmProfiles(ctx context.Context, args params.SetProfileArgs) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Args, func(a params.SetProfileArg) (state.MachineCharmProfiles, error) {
		m, err := p.machine(ctx, a.Entity.Tag, machineTagsParseErrors)
		return state.MachineCharmProfiles{ID: m.ID, Profiles: a.Profiles}, err
	}, func(ws []state.MachineCharmProfiles) []error { return p.st.SetMachinesCharmProfiles(ctx, p.model, ws) }), nil
}

// SetInstanceInfo records each machine's provisioning: instance id and
// nonce (once), hardware, volumes, network config and profiles; the valid
// items in one transaction.
func (p *Provisioner) SetInstanceInfo(ctx context.Context, args params.InstancesInfo) (params.ErrorResults, error) {
	return facade.BulkWrite(ctx, args.Machines,
		func(a params.InstanceInfo) (state.MachineInstanceInfo, error) { return p.instanceInfo(ctx, a) },
		func(ws []state.MachineInstanceInfo) []error { return p.setInstanceInfos(ctx, ws) }), nil
}

// setInstanceInfos records instance infos (one bulk of state), each error
// naming the instance.
func (p *Provisioner) setInstanceInfos(ctx context.Context, ws []state.MachineInstanceInfo) []error {
	errs := p.st.SetInstanceInfos(ctx, p.model, ws)
	for i, err := range errs {
		if err != nil {
			errs[i] = errors.Annotatef(err, "cannot record provisioning info for %q", ws[i].Info.InstanceID)
		}
	}
	return errs
}

// instanceInfo checks the machine and the volume tags of one instance
// info and converts it.
func (p *Provisioner) instanceInfo(ctx context.Context, a params.InstanceInfo) (state.MachineInstanceInfo, error) {
	m, err := p.machine(ctx, a.Tag, machineTags)
	if err != nil {
		return state.MachineInstanceInfo{}, err
	}
	info := state.InstanceInfo{
		InstanceID:    a.InstanceId,
		Nonce:         a.Nonce,
		Hardware:      fromHardware(a.Characteristics),
		DisplayName:   a.DisplayName,
		CharmProfiles: a.CharmProfiles,
	}
	if len(a.Volumes) > 0 {
		info.Volumes = map[string]state.VolumeInfo{}
		for _, v := range a.Volumes {
			vt, err := facade.ParseVolumeTag(v.VolumeTag)
			if err != nil {
				return state.MachineInstanceInfo{}, err
			}
			info.Volumes[vt.Id()] = state.VolumeInfo{VolumeID: v.Info.VolumeId, HardwareID: v.Info.HardwareId,
				WWN: v.Info.WWN, Size: v.Info.Size, Persistent: v.Info.Persistent, Pool: v.Info.Pool}
		}
	}
	if len(a.VolumeAttachments) > 0 {
		info.VolumeAttachments = map[string]state.VolumeAttachmentInfo{}
		for tag, ai := range a.VolumeAttachments {
			vt, err := facade.ParseVolumeTag(tag)
			if err != nil {
				return state.MachineInstanceInfo{}, err
			}
			info.VolumeAttachments[vt.Id()] = state.VolumeAttachmentInfo{DeviceName: ai.DeviceName,
				DeviceLink: ai.DeviceLink, BusAddress: ai.BusAddress, ReadOnly: ai.ReadOnly}
		}
	}
	if len(a.NetworkConfig) > 0 {
		info.LinkLayerDevices = linkLayerDevices(a.NetworkConfig)
	}
	return state.MachineInstanceInfo{ID: m.ID, Info: info}, nil
}

func fromHardware(h *params.HardwareCharacteristics) *state.HardwareCharacteristics {
	if h == nil {
		return nil
	}
	return &state.HardwareCharacteristics{Arch: h.Arch, Mem: h.Mem, RootDisk: h.RootDisk,
		RootDiskSource: h.RootDiskSource, CpuCores: h.CpuCores, CpuPower: h.CpuPower, Tags: h.Tags,
		AvailabilityZone: h.AvailabilityZone, VirtType: h.VirtType}
}

func linkLayerDevices(cfg []params.NetworkConfig) []state.LinkLayerDevice {
	var devs []state.LinkLayerDevice
	for _, c := range cfg {
		i := slices.IndexFunc(devs, func(d state.LinkLayerDevice) bool { return d.Name == c.InterfaceName })
		if i < 0 {
			devs = append(devs, state.LinkLayerDevice{Name: c.InterfaceName, MACAddress: c.MACAddress,
				ProviderID: c.ProviderId, Type: c.InterfaceType, ParentName: c.ParentInterfaceName})
			i = len(devs) - 1
		}
		if c.Address != "" {
			devs[i].Addresses = append(devs[i].Addresses, c.Address)
		}
		for _, a := range c.Addresses {
			devs[i].Addresses = append(devs[i].Addresses, a.Value)
		}
	}
	// Parents before children.
	slices.SortStableFunc(devs, func(a, b state.LinkLayerDevice) int {
		switch {
		case a.ParentName == "" && b.ParentName != "":
			return -1
		case a.ParentName != "" && b.ParentName == "":
			return 1
		}
		return 0
	})
	return devs
}

// SetObservedNetworkConfig replaces the network devices the caller's own
// machine reported (containers and empty config: nothing to do).
func (p *Provisioner) SetObservedNetworkConfig(ctx context.Context, args params.SetMachineNetworkConfig) error {
	return p.setNetworkConfig(ctx, args)
}

// SetHostMachineNetworkConfig is SetObservedNetworkConfig under its older
// name.
func (p *Provisioner) SetHostMachineNetworkConfig(ctx context.Context, args params.SetMachineNetworkConfig) error {
	return p.setNetworkConfig(ctx, args)
}

func (p *Provisioner) setNetworkConfig(ctx context.Context, args params.SetMachineNetworkConfig) error {
	t, err := facade.ParseMachineTag(args.Tag)
	if err != nil {
		return err
	}
	if !p.ctx.IsOwner(t) {
		return facade.ErrPerm
	}
	m, err := p.st.Machine(ctx, p.model, t.Id())
	if errors.Is(err, errors.NotFound) {
		return facade.ErrPerm
	} else if err != nil {
		return err
	}
	if m.IsContainer() || len(args.Config) == 0 {
		return nil
	}
	return p.st.SetLinkLayerDevices(ctx, p.model, m.ID, linkLayerDevices(args.Config))
}

// DistributionGroup returns, for each machine, the instance ids of the
// machines in its distribution group (sorted).
func (p *Provisioner) DistributionGroup(ctx context.Context, args params.Entities) (params.DistributionGroupResults, error) {
	return params.DistributionGroupResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.DistributionGroupResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.DistributionGroupResult{}, err
		}
		group, err := p.distributionGroup(ctx, m)
		if err != nil {
			return params.DistributionGroupResult{}, err
		}
		ids := []string{}
		for _, g := range group {
			if g.Provisioned() && !slices.Contains(ids, g.InstanceID) {
				ids = append(ids, g.InstanceID)
			}
		}
		slices.Sort(ids)
		return params.DistributionGroupResult{Result: ids}, nil
	})}, nil
}

// DistributionGroupByMachineId returns, for each machine, the ids of the
// other machines in its distribution group (sorted).
func (p *Provisioner) DistributionGroupByMachineId(ctx context.Context, args params.Entities) (params.StringsResults, error) {
	return params.StringsResults{Results: facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.StringsResult, error) {
		m, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.StringsResult{}, err
		}
		group, err := p.distributionGroup(ctx, m)
		if err != nil {
			return params.StringsResult{}, err
		}
		ids := []string{}
		for _, g := range group {
			if g.ID != m.ID && !slices.Contains(ids, g.ID) {
				ids = append(ids, g.ID)
			}
		}
		state.SortMachineIDs(ids)
		return params.StringsResult{Result: ids}, nil
	})}, nil
}

// distributionGroup returns m's group, m included: the controller machines
// for a controller, else every machine hosting a unit of an application
// with a principal unit on m.
func (p *Provisioner) distributionGroup(ctx context.Context, m state.Machine) ([]state.Machine, error) {
	if state.IsController(m) {
		return p.st.ControllerMachines(ctx)
	}
	all, err := p.st.Machines(ctx, p.model)
	if err != nil {
		return nil, err
	}
	var out []state.Machine
	units, err := p.st.Units(ctx, p.model)
	if err != nil {
		return nil, err
	}
	apps := map[string]bool{}
	for _, u := range units {
		if u.MachineID == m.ID && u.IsPrincipal() {
			apps[u.Application] = true
		}
	}
	hosts := map[string]bool{}
	for _, u := range units {
		if apps[u.Application] && u.IsPrincipal() && u.MachineID != "" {
			hosts[u.MachineID] = true
		}
	}
	for _, x := range all {
		if hosts[x.ID] {
			out = append(out, x)
		}
	}
	return out, nil
}
