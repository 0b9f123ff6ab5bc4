package provisioner

import (
	"cmp"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// V1 is the facade instance of one call to versions 0 and 1: the 2015
// method set and JSON shapes (rpc/params V1* types) over the shared
// implementation.
type V1 struct {
	p *Provisioner
}

// registerV1 registers the 2015 method set.
func registerV1(m *rpc.Methods[*facade.Context, *V1]) {
	rpc.HandleNoArgs(m, "APIAddresses", (*V1).APIAddresses)
	rpc.HandleNoArgs(m, "APIHostPorts", (*V1).APIHostPorts)
	rpc.HandleNoArgs(m, "CACert", (*V1).CACert)
	rpc.Handle(m, "Constraints", (*V1).Constraints)
	rpc.HandleNoArgs(m, "ContainerConfig", (*V1).ContainerConfig)
	rpc.Handle(m, "ContainerManagerConfig", (*V1).ContainerManagerConfig)
	rpc.Handle(m, "DistributionGroup", (*V1).DistributionGroup)
	rpc.Handle(m, "EnsureDead", (*V1).EnsureDead)
	rpc.HandleNoArgs(m, "EnvironConfig", (*V1).EnvironConfig)
	rpc.HandleNoArgs(m, "EnvironUUID", (*V1).EnvironUUID)
	rpc.Handle(m, "FindTools", (*V1).FindTools)
	rpc.Handle(m, "GetContainerInterfaceInfo", (*V1).GetContainerInterfaceInfo)
	rpc.Handle(m, "InstanceId", (*V1).InstanceId)
	rpc.Handle(m, "Life", (*V1).Life)
	rpc.HandleNoArgs(m, "MachinesWithTransientErrors", (*V1).MachinesWithTransientErrors)
	rpc.Handle(m, "PrepareContainerInterfaceInfo", (*V1).PrepareContainerInterfaceInfo)
	rpc.Handle(m, "ProvisioningInfo", (*V1).ProvisioningInfo)
	rpc.Handle(m, "ReleaseContainerAddresses", (*V1).ReleaseContainerAddresses)
	rpc.Handle(m, "Remove", (*V1).Remove)
	rpc.Handle(m, "RequestedNetworks", (*V1).RequestedNetworks)
	rpc.Handle(m, "Series", (*V1).Series)
	rpc.Handle(m, "SetInstanceInfo", (*V1).SetInstanceInfo)
	rpc.Handle(m, "SetPasswords", (*V1).SetPasswords)
	rpc.Handle(m, "SetProvisioned", (*V1).SetProvisioned)
	rpc.Handle(m, "SetStatus", (*V1).SetStatus)
	rpc.Handle(m, "SetSupportedContainers", (*V1).SetSupportedContainers)
	rpc.HandleNoArgs(m, "StateAddresses", (*V1).StateAddresses)
	rpc.Handle(m, "Status", (*V1).Status)
	rpc.Handle(m, "Tools", (*V1).Tools)
	rpc.Handle(m, "UpdateStatus", (*V1).UpdateStatus)
	rpc.HandleNoArgs(m, "WatchAPIHostPorts", (*V1).WatchAPIHostPorts)
	rpc.Handle(m, "WatchAllContainers", (*V1).WatchAllContainers)
	rpc.Handle(m, "WatchContainers", (*V1).WatchContainers)
	rpc.HandleNoArgs(m, "WatchEnvironMachines", (*V1).WatchEnvironMachines)
	rpc.HandleNoArgs(m, "WatchForEnvironConfigChanges", (*V1).WatchForEnvironConfigChanges)
	rpc.HandleNoArgs(m, "WatchMachineErrorRetry", (*V1).WatchMachineErrorRetry)
}

// Conversions between the 2015 shapes and the shared implementation's.

func entities(a params.V1Entities) params.Entities {
	out := params.Entities{Entities: make([]params.Entity, len(a.Entities))}
	for i, e := range a.Entities {
		out.Entities[i] = params.Entity(e)
	}
	return out
}

var v1Err = params.ToV1Error

func v1Errors(r params.ErrorResults) params.V1ErrorResults {
	out := params.V1ErrorResults{Results: make([]params.V1ErrorResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i].Error = v1Err(x.Error)
	}
	return out
}

func v1Strings(r params.StringResults) params.V1StringResults {
	out := params.V1StringResults{Results: make([]params.V1StringResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i] = params.V1StringResult{Error: v1Err(x.Error), Result: x.Result}
	}
	return out
}

func v1Status(r params.StatusResult) params.V1StatusResult {
	return params.V1StatusResult{Error: v1Err(r.Error), Id: r.Id, Life: r.Life, Status: r.Status,
		Info: r.Info, Data: r.Data, Since: r.Since}
}

func v1Value(v params.Value, networks []string) params.V1Value {
	out := params.V1Value{Arch: v.Arch, Container: v.Container, CpuCores: v.CpuCores, CpuPower: v.CpuPower,
		Mem: v.Mem, RootDisk: v.RootDisk, Tags: v.Tags, InstanceType: v.InstanceType, Spaces: v.Spaces}
	if networks != nil {
		n := slices.Clone(networks)
		out.Networks = &n
	}
	return out
}

func v1StringsWatch(r params.StringsWatchResult) params.V1StringsWatchResult {
	changes := r.Changes
	if changes == nil && r.Error == nil {
		changes = []string{} // 2015 sends [] for no changes
	}
	return params.V1StringsWatchResult{StringsWatcherId: r.StringsWatcherId, Changes: changes, Error: v1Err(r.Error)}
}

func v1Hardware(h *params.V1HardwareCharacteristics) *params.HardwareCharacteristics {
	if h == nil {
		return nil
	}
	return &params.HardwareCharacteristics{Arch: h.Arch, Mem: h.Mem, RootDisk: h.RootDisk, CpuCores: h.CpuCores,
		CpuPower: h.CpuPower, Tags: h.Tags, AvailabilityZone: h.AvailabilityZone}
}

// The methods.

func (v *V1) APIAddresses(ctx context.Context) (params.V1StringsResult, error) {
	r, err := v.p.APIAddresses(ctx)
	return params.V1StringsResult{Result: r.Result}, err
}

func (v *V1) APIHostPorts(ctx context.Context) (params.V1APIHostPortsResult, error) {
	r, err := v.p.APIHostPorts(ctx)
	if err != nil {
		return params.V1APIHostPortsResult{}, err
	}
	out := params.V1APIHostPortsResult{Servers: make([][]params.V1HostPort, len(r.Servers))}
	for i, hps := range r.Servers {
		out.Servers[i] = make([]params.V1HostPort, len(hps))
		for j, hp := range hps {
			out.Servers[i][j] = params.V1HostPort{Value: hp.Value, Type: hp.Type, Scope: hp.Scope, Port: hp.Port}
		}
	}
	return out, nil
}

func (v *V1) CACert(ctx context.Context) (params.V1BytesResult, error) {
	r, err := v.p.CACert(ctx)
	return params.V1BytesResult(r), err
}

func (v *V1) Constraints(ctx context.Context, args params.V1Entities) (params.V1ConstraintsResults, error) {
	r, err := v.p.Constraints(ctx, entities(args))
	out := params.V1ConstraintsResults{Results: make([]params.V1ConstraintsResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i] = params.V1ConstraintsResult{Error: v1Err(x.Error), Constraints: v1Value(x.Constraints, nil)}
	}
	return out, err
}

func (v *V1) ContainerConfig(ctx context.Context) (params.V1ContainerConfig, error) {
	r, err := v.p.ContainerConfig(ctx)
	if err != nil {
		return params.V1ContainerConfig{}, err
	}
	_, cfg, err := v.p.modelConfig(ctx)
	if err != nil {
		return params.V1ContainerConfig{}, err
	}
	px := func(s params.Settings) params.V1ProxySettings {
		return params.V1ProxySettings{Http: s.Http, Https: s.Https, Ftp: s.Ftp, NoProxy: s.NoProxy}
	}
	return params.V1ContainerConfig{
		ProviderType:            r.ProviderType,
		AuthorizedKeys:          r.AuthorizedKeys,
		SSLHostnameVerification: r.SSLHostnameVerification,
		Proxy:                   px(r.LegacyProxy),
		AptProxy:                px(v1AptProxy(cfg, r.LegacyProxy)),
		PreferIPv6:              cfgBool(cfg, "prefer-ipv6", false),
		AllowLXCLoopMounts:      cfgBool(cfg, "allow-lxc-loop-mounts", false),
		EnableOSRefreshUpdate:   r.EnableOSRefreshUpdate,
		EnableOSUpgrade:         r.EnableOSUpgrade,
	}, nil
}

// v1AptProxy is the 2015 AptProxy: the apt-*-proxy keys, each defaulting
// to the general proxy, and the general no-proxy (specs/provisioner.md).
func v1AptProxy(cfg map[string]any, general params.Settings) params.Settings {
	s := proxy(cfg, "apt-")
	s.Http = cmp.Or(s.Http, general.Http)
	s.Https = cmp.Or(s.Https, general.Https)
	s.Ftp = cmp.Or(s.Ftp, general.Ftp)
	s.NoProxy = general.NoProxy
	return s
}

func (v *V1) ContainerManagerConfig(ctx context.Context, args params.V1ContainerManagerConfigParams) (params.V1ContainerManagerConfig, error) {
	r, err := v.p.ContainerManagerConfig(ctx, params.ContainerManagerConfigParams(args))
	return params.V1ContainerManagerConfig(r), err
}

func (v *V1) DistributionGroup(ctx context.Context, args params.V1Entities) (params.V1DistributionGroupResults, error) {
	r, err := v.p.DistributionGroup(ctx, entities(args))
	out := params.V1DistributionGroupResults{Results: make([]params.V1DistributionGroupResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i] = params.V1DistributionGroupResult{Error: v1Err(x.Error), Result: x.Result}
	}
	return out, err
}

func (v *V1) EnsureDead(ctx context.Context, args params.V1Entities) (params.V1ErrorResults, error) {
	r, err := v.p.EnsureDead(ctx, entities(args))
	return v1Errors(r), err
}

// secretKeys are config keys hidden from callers other than the
// controller agent (2015 EnvironConfig).
var secretKeys = []string{"admin-secret", "secret-key", "access-key", "password", "private-key", "client-key"}

func (v *V1) EnvironConfig(ctx context.Context) (params.V1EnvironConfigResult, error) {
	_, cfg, err := v.p.modelConfig(ctx)
	if err != nil {
		return params.V1EnvironConfigResult{}, err
	}
	if !v.p.isManager() {
		for _, k := range secretKeys {
			if _, ok := cfg[k]; ok {
				cfg[k] = "not available"
			}
		}
	}
	return params.V1EnvironConfigResult{Config: cfg}, nil
}

func (v *V1) EnvironUUID(ctx context.Context) (params.V1StringResult, error) {
	r, err := v.p.ModelUUID(ctx)
	return params.V1StringResult{Result: r.Result}, err
}

func (v *V1) FindTools(ctx context.Context, args params.V1FindToolsParams) (params.V1FindToolsResult, error) {
	f := environ.ToolsFilter{Major: args.MajorVersion, Minor: args.MinorVersion, Release: args.Series, Arch: args.Arch}
	if args.Number != "" && args.Number != "0.0.0" {
		n, err := environ.ParseNumber(args.Number)
		if err != nil {
			return params.V1FindToolsResult{Error: v1Err(v.p.ctx.ServerError(errors.NewNotValid(nil, err.Error())))}, nil
		}
		f.Number = n
	}
	found, err := v.p.findTools(ctx, f)
	if err != nil {
		return params.V1FindToolsResult{Error: v1Err(v.p.ctx.ServerError(err))}, nil
	}
	return params.V1FindToolsResult{List: v1Tools(v.p.wireTools(ctx, found, args.Series))}, nil
}

func v1Tools(ts []params.Tools) []params.V1Tools {
	out := make([]params.V1Tools, len(ts))
	for i, t := range ts {
		out[i] = params.V1Tools(t)
	}
	return out
}

func v1NetworkConfigs(r params.MachineNetworkConfigResults) params.V1MachineNetworkConfigResults {
	out := params.V1MachineNetworkConfigResults{Results: make([]params.V1MachineNetworkConfigResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i].Error = v1Err(x.Error)
		for _, c := range x.Config {
			out.Results[i].Config = append(out.Results[i].Config, params.V1NetworkConfig{
				DeviceIndex: c.DeviceIndex, MACAddress: c.MACAddress, CIDR: c.CIDR,
				NetworkName: networkName(c), ProviderId: c.ProviderId, ProviderSubnetId: c.ProviderSubnetId,
				VLANTag: c.VLANTag, InterfaceName: c.InterfaceName, Disabled: c.Disabled, NoAutoStart: c.NoAutoStart,
				ConfigType: c.ConfigType, Address: c.Address, DNSServers: c.DNSServers, GatewayAddress: c.GatewayAddress,
			})
		}
	}
	return out
}

func networkName(c params.NetworkConfig) string {
	for _, a := range c.Addresses {
		if a.SpaceName != "" {
			return a.SpaceName
		}
	}
	return ""
}

func (v *V1) GetContainerInterfaceInfo(ctx context.Context, args params.V1Entities) (params.V1MachineNetworkConfigResults, error) {
	r, err := v.p.GetContainerInterfaceInfo(ctx, entities(args))
	return v1NetworkConfigs(r), err
}

func (v *V1) PrepareContainerInterfaceInfo(ctx context.Context, args params.V1Entities) (params.V1MachineNetworkConfigResults, error) {
	r, err := v.p.PrepareContainerInterfaceInfo(ctx, entities(args))
	return v1NetworkConfigs(r), err
}

func (v *V1) InstanceId(ctx context.Context, args params.V1Entities) (params.V1StringResults, error) {
	r, err := v.p.InstanceId(ctx, entities(args))
	return v1Strings(r), err
}

func (v *V1) Life(ctx context.Context, args params.V1Entities) (params.V1LifeResults, error) {
	r, err := v.p.Life(ctx, entities(args))
	out := params.V1LifeResults{Results: make([]params.V1LifeResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i] = params.V1LifeResult{Life: x.Life, Error: v1Err(x.Error)}
	}
	return out, err
}

func (v *V1) MachinesWithTransientErrors(ctx context.Context) (params.V1StatusResults, error) {
	r, err := v.p.MachinesWithTransientErrors(ctx)
	out := params.V1StatusResults{Results: make([]params.V1StatusResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i] = v1Status(x)
	}
	return out, err
}

func (v *V1) ProvisioningInfo(ctx context.Context, args params.V1Entities) (params.V1ProvisioningInfoResults, error) {
	var call provisioningCall
	return params.V1ProvisioningInfoResults{Results: facade.Bulk(ctx, args.Entities, func(e params.V1Entity) (params.V1ProvisioningInfoResult, error) {
		m, err := v.p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.V1ProvisioningInfoResult{}, err
		}
		info, err := v.provisioningInfo(ctx, &call, m)
		if err != nil {
			return params.V1ProvisioningInfoResult{}, err
		}
		return params.V1ProvisioningInfoResult{Result: info}, nil
	})}, nil
}

func (v *V1) provisioningInfo(ctx context.Context, call *provisioningCall, m state.Machine) (*params.V1ProvisioningInfo, error) {
	p := v.p
	if err := p.shared(ctx, call); err != nil {
		return nil, err
	}
	cfg, mgr := call.cfg, call.mgr
	pl, err := p.placed(ctx, m)
	if err != nil {
		return nil, err
	}
	vols, _, err := p.volumeParams(ctx, mgr, m, cfg, map[string]string{"juju-env-uuid": p.model})
	if err != nil {
		return nil, err
	}
	jobs := make([]string, len(m.Jobs))
	tags := state.ResourceTags(cfg)
	tags["juju-env-uuid"] = p.model
	for i, j := range m.Jobs {
		jobs[i] = j
		if j == state.JobManageModel {
			jobs[i] = "JobManageEnviron"
			tags["juju-is-state"] = "true"
		}
	}
	if len(pl.principals) > 0 {
		tags["juju-units-deployed"] = strings.Join(pl.principals, " ")
	}
	zones, err := p.subnetsToZones(ctx, m)
	if err != nil {
		return nil, errors.Annotate(err, "cannot match subnets to zones")
	}
	info := &params.V1ProvisioningInfo{
		Constraints:    v1Value(toValue(m.Constraints), derefStrings(m.Constraints.Networks)),
		Series:         p.machineSeries(ctx, m),
		Placement:      m.Placement,
		Networks:       cloneStrings(m.RequestedNetworks),
		Jobs:           jobs,
		Tags:           tags,
		SubnetsToZones: zones,
	}
	for _, vp := range vols {
		out := params.V1VolumeParams{VolumeTag: vp.VolumeTag, Size: vp.Size, Provider: vp.Provider,
			Attributes: vp.Attributes, Tags: vp.Tags}
		if a := vp.Attachment; a != nil {
			out.Attachment = &params.V1VolumeAttachmentParams{VolumeTag: a.VolumeTag, MachineTag: a.MachineTag,
				VolumeId: a.VolumeId, InstanceId: a.InstanceId, Provider: a.Provider, ReadOnly: a.ReadOnly}
		}
		info.Volumes = append(info.Volumes, out)
	}
	return info, nil
}

// machineSeries is the series a 2015 client sees for m: that of its base
// (machineBase; environ's copy of Juju's table), else the series it was
// added with (one no base names).
func (p *Provisioner) machineSeries(ctx context.Context, m state.Machine) string {
	if m.Base == (state.Base{}) && m.Series != "" {
		return m.Series
	}
	b := p.machineBase(ctx, m)
	if s, ok := environ.BaseSeries(b.Name, b.Channel); ok {
		return s
	}
	return m.Series
}

func derefStrings(s *[]string) []string {
	if s == nil {
		return nil
	}
	return *s
}

func (v *V1) ReleaseContainerAddresses(ctx context.Context, args params.V1Entities) (params.V1ErrorResults, error) {
	r, err := v.p.ReleaseContainerAddresses(ctx, entities(args))
	return v1Errors(r), err
}

func (v *V1) Remove(ctx context.Context, args params.V1Entities) (params.V1ErrorResults, error) {
	r, err := v.p.Remove(ctx, entities(args))
	return v1Errors(r), err
}

func (v *V1) RequestedNetworks(ctx context.Context, args params.V1Entities) (params.V1RequestedNetworksResults, error) {
	return params.V1RequestedNetworksResults{Results: facade.Bulk(ctx, args.Entities, func(e params.V1Entity) (params.V1RequestedNetworkResult, error) {
		m, err := v.p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.V1RequestedNetworkResult{}, err
		}
		return params.V1RequestedNetworkResult{Networks: cloneStrings(m.RequestedNetworks)}, nil
	})}, nil
}

func (v *V1) Series(ctx context.Context, args params.V1Entities) (params.V1StringResults, error) {
	return params.V1StringResults{Results: facade.Bulk(ctx, args.Entities, func(e params.V1Entity) (params.V1StringResult, error) {
		m, err := v.p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return params.V1StringResult{}, err
		}
		return params.V1StringResult{Result: v.p.machineSeries(ctx, m)}, nil
	})}, nil
}

func v1InstanceInfo(a params.V1InstanceInfo) params.InstanceInfo {
	out := params.InstanceInfo{Tag: a.Tag, InstanceId: a.InstanceId, Nonce: a.Nonce,
		Characteristics: v1Hardware(a.Characteristics)}
	for _, vol := range a.Volumes {
		out.Volumes = append(out.Volumes, params.Volume{VolumeTag: vol.VolumeTag, Info: params.VolumeInfo{
			VolumeId: vol.Info.VolumeId, HardwareId: vol.Info.HardwareId, Size: vol.Info.Size, Persistent: vol.Info.Persistent}})
	}
	if a.VolumeAttachments != nil {
		out.VolumeAttachments = map[string]params.VolumeAttachmentInfo{}
		for k, ai := range a.VolumeAttachments {
			out.VolumeAttachments[k] = params.VolumeAttachmentInfo{DeviceName: ai.DeviceName, BusAddress: ai.BusAddress, ReadOnly: ai.ReadOnly}
		}
	}
	// 2015 interfaces become the machine's devices; names repeated on one
	// machine are dropped, as 2015 state did.
	for _, iface := range a.Interfaces {
		if slices.ContainsFunc(out.NetworkConfig, func(c params.NetworkConfig) bool { return c.InterfaceName == iface.InterfaceName }) {
			continue
		}
		out.NetworkConfig = append(out.NetworkConfig, params.NetworkConfig{InterfaceName: iface.InterfaceName,
			MACAddress: iface.MACAddress, Disabled: iface.Disabled})
	}
	return out
}

func (v *V1) SetInstanceInfo(ctx context.Context, args params.V1InstancesInfo) (params.V1ErrorResults, error) {
	errs := facade.BulkWriteErrors(ctx, args.Machines, func(a params.V1InstanceInfo) (state.MachineInstanceInfo, error) {
		for _, n := range a.Networks {
			if name, ok := strings.CutPrefix(n.Tag, "network-"); !ok || name == "" {
				return state.MachineInstanceInfo{}, &facade.TagError{Err: errors.Errorf("%s is not a valid network tag", facade.QuoteTag(n.Tag))}
			}
		}
		return v.p.instanceInfo(ctx, v1InstanceInfo(a))
	}, func(ws []state.MachineInstanceInfo) []error { return v.p.setInstanceInfos(ctx, ws) })
	out := params.V1ErrorResults{Results: make([]params.V1ErrorResult, len(errs))}
	for i, e := range errs {
		out.Results[i].Error = v1Err(e)
	}
	return out, nil
}

func (v *V1) SetPasswords(ctx context.Context, args params.V1EntityPasswords) (params.V1ErrorResults, error) {
	in := params.EntityPasswords{Changes: make([]params.EntityPassword, len(args.Changes))}
	for i, c := range args.Changes {
		in.Changes[i] = params.EntityPassword(c)
	}
	r, err := v.p.SetPasswords(ctx, in)
	return v1Errors(r), err
}

func (v *V1) SetProvisioned(ctx context.Context, args params.V1SetProvisioned) (params.V1ErrorResults, error) {
	return params.V1ErrorResults{Results: facade.Bulk(ctx, args.Machines, func(a params.V1MachineSetProvisioned) (params.V1ErrorResult, error) {
		m, err := v.p.machine(ctx, a.Tag, machineTags)
		if err != nil {
			return params.V1ErrorResult{}, err
		}
		return params.V1ErrorResult{}, v.p.st.SetInstanceInfo(ctx, v.p.model, m.ID, state.InstanceInfo{
			InstanceID: a.InstanceId, Nonce: a.Nonce, Hardware: fromHardware(v1Hardware(a.Characteristics))})
	})}, nil
}

func setStatusArgs(args params.V1SetStatus) params.SetStatus {
	out := params.SetStatus{Entities: make([]params.EntityStatusArgs, len(args.Entities))}
	for i, e := range args.Entities {
		out.Entities[i] = params.EntityStatusArgs(e)
	}
	return out
}

func (v *V1) SetStatus(ctx context.Context, args params.V1SetStatus) (params.V1ErrorResults, error) {
	r, err := v.p.SetStatus(ctx, setStatusArgs(args))
	return v1Errors(r), err
}

// UpdateStatus merges data into each machine's agent status data.
func (v *V1) UpdateStatus(ctx context.Context, args params.V1SetStatus) (params.V1ErrorResults, error) {
	return params.V1ErrorResults{Results: facade.Bulk(ctx, args.Entities, func(a params.V1EntityStatusArgs) (params.V1ErrorResult, error) {
		m, err := v.p.machine(ctx, a.Tag, machineTags)
		if err != nil {
			return params.V1ErrorResult{}, err
		}
		return params.V1ErrorResult{}, v.p.st.UpdateMachineStatusData(ctx, v.p.model, m.ID, a.Data)
	})}, nil
}

func (v *V1) SetSupportedContainers(ctx context.Context, args params.V1MachineContainersParams) (params.V1ErrorResults, error) {
	in := params.MachineContainersParams{Params: make([]params.MachineContainers, len(args.Params))}
	for i, a := range args.Params {
		in.Params[i] = params.MachineContainers(a)
	}
	r, err := v.p.SetSupportedContainers(ctx, in)
	return v1Errors(r), err
}

// StateAddresses returns the controller's state (database) addresses:
// provisiond has no separate database server, so they are the API hosts
// with the controller config's state-port (default 37017).
func (v *V1) StateAddresses(ctx context.Context) (params.V1StringsResult, error) {
	servers, err := v.p.st.APIHostPorts(ctx)
	if err != nil {
		return params.V1StringsResult{}, err
	}
	port := 37017
	if ctrl, err := v.p.st.Controller(ctx); err == nil {
		if f, ok := ctrl.Config["state-port"].(float64); ok && f > 0 {
			port = int(f)
		}
	}
	out := []string{}
	for _, hps := range servers {
		for _, hp := range hps {
			a := net.JoinHostPort(hp.Value, strconv.Itoa(port))
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return params.V1StringsResult{Result: out}, nil
}

func (v *V1) Status(ctx context.Context, args params.V1Entities) (params.V1StatusResults, error) {
	r, err := v.p.Status(ctx, entities(args))
	out := params.V1StatusResults{Results: make([]params.V1StatusResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i] = v1Status(x)
	}
	return out, err
}

// Tools returns, for each entity, the first matching agent binary, with
// hostname verification disabled (the URL is the controller's).
func (v *V1) Tools(ctx context.Context, args params.V1Entities) (params.V1ToolsResults, error) {
	r, err := v.p.Tools(ctx, entities(args))
	if err != nil {
		return params.V1ToolsResults{}, err
	}
	out := params.V1ToolsResults{Results: make([]params.V1ToolsResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i].Error = v1Err(x.Error)
		if len(x.Tools) > 0 {
			t := params.V1Tools(x.Tools[0])
			out.Results[i].Tools = &t
			out.Results[i].DisableSSLHostnameVerification = true
		}
	}
	return out, nil
}

func (v *V1) WatchAPIHostPorts(ctx context.Context) (params.V1NotifyWatchResult, error) {
	r, err := v.p.WatchAPIHostPorts(ctx)
	return params.V1NotifyWatchResult{NotifyWatcherId: r.NotifyWatcherId}, err
}

func v1WatchContainers(args params.V1WatchContainers) params.WatchContainers {
	out := params.WatchContainers{Params: make([]params.WatchContainer, len(args.Params))}
	for i, a := range args.Params {
		out.Params[i] = params.WatchContainer(a)
	}
	return out
}

func (v *V1) WatchContainers(ctx context.Context, args params.V1WatchContainers) (params.V1StringsWatchResults, error) {
	r, err := v.p.WatchContainers(ctx, v1WatchContainers(args))
	out := params.V1StringsWatchResults{Results: make([]params.V1StringsWatchResult, len(r.Results))}
	for i, x := range r.Results {
		out.Results[i] = v1StringsWatch(x)
	}
	return out, err
}

func (v *V1) WatchAllContainers(ctx context.Context, args params.V1WatchContainers) (params.V1StringsWatchResults, error) {
	return v.WatchContainers(ctx, args)
}

func (v *V1) WatchEnvironMachines(ctx context.Context) (params.V1StringsWatchResult, error) {
	r, err := v.p.WatchModelMachines(ctx)
	if err != nil {
		return params.V1StringsWatchResult{}, err
	}
	return v1StringsWatch(r), nil
}

func (v *V1) WatchForEnvironConfigChanges(ctx context.Context) (params.V1NotifyWatchResult, error) {
	r, err := v.p.WatchForModelConfigChanges(ctx)
	return params.V1NotifyWatchResult{NotifyWatcherId: r.NotifyWatcherId}, err
}

func (v *V1) WatchMachineErrorRetry(ctx context.Context) (params.V1NotifyWatchResult, error) {
	r, err := v.p.WatchMachineErrorRetry(ctx)
	return params.V1NotifyWatchResult{NotifyWatcherId: r.NotifyWatcherId}, err
}
