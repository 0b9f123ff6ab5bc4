package client

import (
	"context"

	"github.com/provisiond/provisiond/rpc/params"
)

// Provisioner facade name and the version the typed client speaks.
const (
	ProvisionerFacade  = "Provisioner"
	ProvisionerVersion = 11
)

// Provisioner is the typed client of the machine Provisioner facade,
// version 11: one method per method of the facade's schema, taking and
// returning the wire types of package params (docs/provisioner.md has the
// server's rules). Bulk methods return one result per argument item, in
// order, each with its own error (a *params.Error with its code: test it
// with errors.Is against ErrNotFound, ErrUnauthorized, ...); the returned
// error is the call's own (transport, login, facade-level refusal).
// Watch methods that return one watcher start it as a NotifyWatch or
// StringsWatch, which the caller must Stop.
//
// Machine(tag) gives the single-machine view Juju's provisioner worker
// uses (p.Machine("machine-1").Life(ctx)).
//
// Callers are machine agents and the controller agent (users get
// ErrUnauthorized). The controller agent reaches top-level machines; a
// machine agent reaches itself and its direct containers. A Provisioner is
// safe for concurrent use, as its Conn.
type Provisioner struct {
	f facade
}

// NewProvisioner returns the Provisioner client of c, which must be logged
// in as an agent on a model endpoint.
func NewProvisioner(c *Conn) *Provisioner {
	return &Provisioner{f: facade{c, ProvisionerFacade, ProvisionerVersion}}
}

// Conn returns the connection p calls on.
func (p *Provisioner) Conn() *Conn { return p.f.c }

// APIAddresses returns the API addresses agents connect to ("host:port").
func (p *Provisioner) APIAddresses(ctx context.Context) (params.StringsResult, error) {
	return call[params.StringsResult](ctx, p.f, "APIAddresses", nil)
}

// APIHostPorts returns the API servers' addresses, one list per server.
func (p *Provisioner) APIHostPorts(ctx context.Context) (params.APIHostPortsResult, error) {
	return call[params.APIHostPortsResult](ctx, p.f, "APIHostPorts", nil)
}

// AvailabilityZone returns each machine's availability zone.
func (p *Provisioner) AvailabilityZone(ctx context.Context, args params.Entities) (params.StringResults, error) {
	return bulk[params.StringResults](ctx, p.f, "AvailabilityZone", args, len(args.Entities))
}

// CACert returns the controller's CA certificate (PEM).
func (p *Provisioner) CACert(ctx context.Context) (params.BytesResult, error) {
	return call[params.BytesResult](ctx, p.f, "CACert", nil)
}

// Constraints returns each machine's constraints.
func (p *Provisioner) Constraints(ctx context.Context, args params.Entities) (params.ConstraintsResults, error) {
	return bulk[params.ConstraintsResults](ctx, p.f, "Constraints", args, len(args.Entities))
}

// ContainerConfig returns what a container needs from the model's config
// (proxies, mirrors, keys, cloud-init user data).
func (p *Provisioner) ContainerConfig(ctx context.Context) (params.ContainerConfig, error) {
	return call[params.ContainerConfig](ctx, p.f, "ContainerConfig", nil)
}

// ContainerManagerConfig returns the container manager's configuration for
// a container type.
func (p *Provisioner) ContainerManagerConfig(ctx context.Context, args params.ContainerManagerConfigParams) (params.ContainerManagerConfig, error) {
	return call[params.ContainerManagerConfig](ctx, p.f, "ContainerManagerConfig", args)
}

// ControllerAPIInfoForModels returns the controller's addresses and CA
// certificate for each model tag.
func (p *Provisioner) ControllerAPIInfoForModels(ctx context.Context, args params.Entities) (params.ControllerAPIInfoResults, error) {
	return bulk[params.ControllerAPIInfoResults](ctx, p.f, "ControllerAPIInfoForModels", args, len(args.Entities))
}

// ControllerConfig returns the controller's configuration.
func (p *Provisioner) ControllerConfig(ctx context.Context) (params.ControllerConfigResult, error) {
	return call[params.ControllerConfigResult](ctx, p.f, "ControllerConfig", nil)
}

// DistributionGroup returns, for each machine, the instance ids of the
// machines it should be spread from.
func (p *Provisioner) DistributionGroup(ctx context.Context, args params.Entities) (params.DistributionGroupResults, error) {
	return bulk[params.DistributionGroupResults](ctx, p.f, "DistributionGroup", args, len(args.Entities))
}

// DistributionGroupByMachineId is DistributionGroup with machine ids.
func (p *Provisioner) DistributionGroupByMachineId(ctx context.Context, args params.Entities) (params.StringsResults, error) {
	return bulk[params.StringsResults](ctx, p.f, "DistributionGroupByMachineId", args, len(args.Entities))
}

// EnsureDead makes each machine dead.
func (p *Provisioner) EnsureDead(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "EnsureDead", args, len(args.Entities))
}

// FindTools lists the agent binaries matching args.
func (p *Provisioner) FindTools(ctx context.Context, args params.FindToolsParams) (params.FindToolsResult, error) {
	return call[params.FindToolsResult](ctx, p.f, "FindTools", args)
}

// GetContainerInterfaceInfo returns each container's network config as
// prepared before.
func (p *Provisioner) GetContainerInterfaceInfo(ctx context.Context, args params.Entities) (params.MachineNetworkConfigResults, error) {
	return bulk[params.MachineNetworkConfigResults](ctx, p.f, "GetContainerInterfaceInfo", args, len(args.Entities))
}

// GetContainerProfileInfo returns the LXD profiles each container needs.
func (p *Provisioner) GetContainerProfileInfo(ctx context.Context, args params.Entities) (params.ContainerProfileResults, error) {
	return bulk[params.ContainerProfileResults](ctx, p.f, "GetContainerProfileInfo", args, len(args.Entities))
}

// HostChangesForContainers returns the bridges each container's host
// needs.
func (p *Provisioner) HostChangesForContainers(ctx context.Context, args params.Entities) (params.HostNetworkChangeResults, error) {
	return bulk[params.HostNetworkChangeResults](ctx, p.f, "HostChangesForContainers", args, len(args.Entities))
}

// InstanceId returns each machine's instance id (ErrNotProvisioned before
// SetInstanceInfo).
func (p *Provisioner) InstanceId(ctx context.Context, args params.Entities) (params.StringResults, error) {
	return bulk[params.StringResults](ctx, p.f, "InstanceId", args, len(args.Entities))
}

// InstanceStatus returns the status of each machine's instance.
func (p *Provisioner) InstanceStatus(ctx context.Context, args params.Entities) (params.StatusResults, error) {
	return bulk[params.StatusResults](ctx, p.f, "InstanceStatus", args, len(args.Entities))
}

// KeepInstance reports whether each machine's instance is kept when the
// machine is removed.
func (p *Provisioner) KeepInstance(ctx context.Context, args params.Entities) (params.BoolResults, error) {
	return bulk[params.BoolResults](ctx, p.f, "KeepInstance", args, len(args.Entities))
}

// Life returns each machine's life ("alive", "dying", "dead").
func (p *Provisioner) Life(ctx context.Context, args params.Entities) (params.LifeResults, error) {
	return bulk[params.LifeResults](ctx, p.f, "Life", args, len(args.Entities))
}

// MachinesWithTransientErrors returns the machines whose provisioning
// failed with an error worth retrying.
func (p *Provisioner) MachinesWithTransientErrors(ctx context.Context) (params.StatusResults, error) {
	return call[params.StatusResults](ctx, p.f, "MachinesWithTransientErrors", nil)
}

// MarkMachinesForRemoval marks each dead machine for removal.
func (p *Provisioner) MarkMachinesForRemoval(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "MarkMachinesForRemoval", args, len(args.Entities))
}

// ModelConfig returns the model's configuration.
func (p *Provisioner) ModelConfig(ctx context.Context) (params.ModelConfigResult, error) {
	return call[params.ModelConfigResult](ctx, p.f, "ModelConfig", nil)
}

// ModelUUID returns the UUID of the connection's model.
func (p *Provisioner) ModelUUID(ctx context.Context) (params.StringResult, error) {
	return call[params.StringResult](ctx, p.f, "ModelUUID", nil)
}

// PrepareContainerInterfaceInfo allocates each container's addresses and
// returns its network config.
func (p *Provisioner) PrepareContainerInterfaceInfo(ctx context.Context, args params.Entities) (params.MachineNetworkConfigResults, error) {
	return bulk[params.MachineNetworkConfigResults](ctx, p.f, "PrepareContainerInterfaceInfo", args, len(args.Entities))
}

// ProvisioningInfo returns what starting each machine's instance needs.
func (p *Provisioner) ProvisioningInfo(ctx context.Context, args params.Entities) (params.ProvisioningInfoResults, error) {
	return bulk[params.ProvisioningInfoResults](ctx, p.f, "ProvisioningInfo", args, len(args.Entities))
}

// ReleaseContainerAddresses releases each container's addresses.
func (p *Provisioner) ReleaseContainerAddresses(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "ReleaseContainerAddresses", args, len(args.Entities))
}

// Remove removes each dead machine.
func (p *Provisioner) Remove(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "Remove", args, len(args.Entities))
}

// SetCharmProfiles records the charm profiles applied to each machine.
func (p *Provisioner) SetCharmProfiles(ctx context.Context, args params.SetProfileArgs) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "SetCharmProfiles", args, len(args.Args))
}

// SetHostMachineNetworkConfig records a host's network config.
func (p *Provisioner) SetHostMachineNetworkConfig(ctx context.Context, args params.SetMachineNetworkConfig) error {
	return p.f.call(ctx, "SetHostMachineNetworkConfig", args, nil)
}

// SetInstanceInfo records each machine's instance: id, nonce (what its
// agent logs in with), hardware, volumes, network config.
func (p *Provisioner) SetInstanceInfo(ctx context.Context, args params.InstancesInfo) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "SetInstanceInfo", args, len(args.Machines))
}

// SetInstanceStatus sets the status of each machine's instance.
func (p *Provisioner) SetInstanceStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "SetInstanceStatus", args, len(args.Entities))
}

// SetModificationStatus sets the status of changes to each machine.
func (p *Provisioner) SetModificationStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "SetModificationStatus", args, len(args.Entities))
}

// SetObservedNetworkConfig records the network config a machine observed.
func (p *Provisioner) SetObservedNetworkConfig(ctx context.Context, args params.SetMachineNetworkConfig) error {
	return p.f.call(ctx, "SetObservedNetworkConfig", args, nil)
}

// SetPasswords sets each machine agent's password (at least 18
// characters).
func (p *Provisioner) SetPasswords(ctx context.Context, args params.EntityPasswords) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "SetPasswords", args, len(args.Changes))
}

// SetStatus sets each machine's agent status.
func (p *Provisioner) SetStatus(ctx context.Context, args params.SetStatus) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "SetStatus", args, len(args.Entities))
}

// SetSupportedContainers records the container types each machine
// supports.
func (p *Provisioner) SetSupportedContainers(ctx context.Context, args params.MachineContainersParams) (params.ErrorResults, error) {
	return bulk[params.ErrorResults](ctx, p.f, "SetSupportedContainers", args, len(args.Params))
}

// Status returns each machine's agent status.
func (p *Provisioner) Status(ctx context.Context, args params.Entities) (params.StatusResults, error) {
	return bulk[params.StatusResults](ctx, p.f, "Status", args, len(args.Entities))
}

// SupportedContainers returns the container types each machine supports,
// and whether it has reported them.
func (p *Provisioner) SupportedContainers(ctx context.Context, args params.Entities) (params.MachineContainerResults, error) {
	return bulk[params.MachineContainerResults](ctx, p.f, "SupportedContainers", args, len(args.Entities))
}

// Tools returns the agent binaries each machine should run.
func (p *Provisioner) Tools(ctx context.Context, args params.Entities) (params.ToolsResults, error) {
	return bulk[params.ToolsResults](ctx, p.f, "Tools", args, len(args.Entities))
}

// WatchAPIHostPorts watches the API servers' addresses.
func (p *Provisioner) WatchAPIHostPorts(ctx context.Context) (*NotifyWatch, error) {
	return provNotify(ctx, p, "WatchAPIHostPorts")
}

// WatchAllContainers watches the containers of any type of each machine;
// start one watch per item with NewStringsWatch, or use
// Machine.WatchAllContainers.
func (p *Provisioner) WatchAllContainers(ctx context.Context, args params.WatchContainers) (params.StringsWatchResults, error) {
	return bulk[params.StringsWatchResults](ctx, p.f, "WatchAllContainers", args, len(args.Params))
}

// WatchContainers watches the containers of one type of each machine;
// start one watch per item with NewStringsWatch, or use
// Machine.WatchContainers.
func (p *Provisioner) WatchContainers(ctx context.Context, args params.WatchContainers) (params.StringsWatchResults, error) {
	return bulk[params.StringsWatchResults](ctx, p.f, "WatchContainers", args, len(args.Params))
}

// WatchForModelConfigChanges watches the model's configuration.
func (p *Provisioner) WatchForModelConfigChanges(ctx context.Context) (*NotifyWatch, error) {
	return provNotify(ctx, p, "WatchForModelConfigChanges")
}

// WatchMachineErrorRetry fires when machines in error should be retried
// (a timer watcher: the daemon's clock drives it).
func (p *Provisioner) WatchMachineErrorRetry(ctx context.Context) (*NotifyWatch, error) {
	return provNotify(ctx, p, "WatchMachineErrorRetry")
}

// WatchModelMachineStartTimes watches the start times of the model's
// machines (batched on the daemon's clock).
func (p *Provisioner) WatchModelMachineStartTimes(ctx context.Context) (*StringsWatch, error) {
	return provStrings(ctx, p, "WatchModelMachineStartTimes")
}

// WatchModelMachines watches the life of the model's top-level machines;
// the first value lists them all.
func (p *Provisioner) WatchModelMachines(ctx context.Context) (*StringsWatch, error) {
	return provStrings(ctx, p, "WatchModelMachines")
}

// WatchModelMachinesFrom is WatchModelMachines resumed after revision
// from (Conn.CallFrom): the first value lists the machines whose life
// changed after it (all of them when from is 0), and the watch's Revision
// says up to which revision the values received cover every change, to
// resume from after a reconnection. ErrWatcherReset: the history after
// from is no longer kept; watch again from 0.
func (p *Provisioner) WatchModelMachinesFrom(ctx context.Context, from uint64) (*StringsWatch, error) {
	var res params.StringsWatchResult
	rev, err := p.f.c.CallFrom(ctx, p.f.name, p.f.version, "", "WatchModelMachines", from, nil, &res)
	if err != nil {
		return nil, err
	}
	return NewStringsWatchFrom(p.f.c, res, rev)
}

// WatchAPIHostPortsFrom is WatchAPIHostPorts resumed after revision
// from (Conn.CallFrom), as NewNotifyWatchFrom says: resumed, a first
// value comes when the addresses may have changed since (the live
// servers leave no history: a resumed watch always sends one).
// ErrWatcherReset: the history after from is no longer kept; watch again
// from 0.
func (p *Provisioner) WatchAPIHostPortsFrom(ctx context.Context, from uint64) (*NotifyWatch, error) {
	return provNotifyFrom(ctx, p, "WatchAPIHostPorts", from)
}

// WatchForModelConfigChangesFrom is WatchForModelConfigChanges resumed
// after revision from, as NewNotifyWatchFrom says: resumed, a first value
// comes only if the model's config changed since. ErrWatcherReset: the
// history after from is no longer kept; watch again from 0.
func (p *Provisioner) WatchForModelConfigChangesFrom(ctx context.Context, from uint64) (*NotifyWatch, error) {
	return provNotifyFrom(ctx, p, "WatchForModelConfigChanges", from)
}

func provNotifyFrom(ctx context.Context, p *Provisioner, method string, from uint64) (*NotifyWatch, error) {
	var res params.NotifyWatchResult
	rev, err := p.f.c.CallFrom(ctx, p.f.name, p.f.version, "", method, from, nil, &res)
	if err != nil {
		return nil, err
	}
	return NewNotifyWatchFrom(p.f.c, res, rev, from > 0)
}

func provNotify(ctx context.Context, p *Provisioner, method string) (*NotifyWatch, error) {
	res, err := call[params.NotifyWatchResult](ctx, p.f, method, nil)
	if err != nil {
		return nil, err
	}
	return NewNotifyWatch(p.f.c, res)
}

func provStrings(ctx context.Context, p *Provisioner, method string) (*StringsWatch, error) {
	res, err := call[params.StringsWatchResult](ctx, p.f, method, nil)
	if err != nil {
		return nil, err
	}
	return NewStringsWatch(p.f.c, res)
}

// Machine is one machine as Juju's provisioner worker sees it: each method
// is the one-item call of the Provisioner method of that name, and returns
// the item's error (a *params.Error) as its error. It makes no call until
// a method is called.
type Machine struct {
	p   *Provisioner
	tag string
}

// Machine returns the view of the machine with tag ("machine-1",
// "machine-1-lxd-0"; see MachineTag).
func (p *Provisioner) Machine(tag string) *Machine { return &Machine{p: p, tag: tag} }

// Tag returns the machine's tag.
func (m *Machine) Tag() string { return m.tag }

func (m *Machine) ents() params.Entities { return Entities(m.tag) }

// Life returns the machine's life.
func (m *Machine) Life(ctx context.Context) (string, error) {
	res, err := m.p.Life(ctx, m.ents())
	if err != nil {
		return "", err
	}
	return res.Results[0].Life, itemErr(res.Results[0].Error)
}

// ProvisioningInfo returns what starting the machine's instance needs.
func (m *Machine) ProvisioningInfo(ctx context.Context) (*params.ProvisioningInfo, error) {
	res, err := m.p.ProvisioningInfo(ctx, m.ents())
	if err != nil {
		return nil, err
	}
	if err := itemErr(res.Results[0].Error); err != nil {
		return nil, err
	}
	return res.Results[0].Result, nil
}

// Constraints returns the machine's constraints.
func (m *Machine) Constraints(ctx context.Context) (params.Value, error) {
	res, err := m.p.Constraints(ctx, m.ents())
	if err != nil {
		return params.Value{}, err
	}
	return res.Results[0].Constraints, itemErr(res.Results[0].Error)
}

// InstanceId returns the machine's instance id (ErrNotProvisioned before
// SetInstanceInfo).
func (m *Machine) InstanceId(ctx context.Context) (string, error) {
	res, err := m.p.InstanceId(ctx, m.ents())
	if err != nil {
		return "", err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// Status returns the machine's agent status.
func (m *Machine) Status(ctx context.Context) (params.StatusResult, error) {
	res, err := m.p.Status(ctx, m.ents())
	if err != nil {
		return params.StatusResult{}, err
	}
	return res.Results[0], itemErr(res.Results[0].Error)
}

// InstanceStatus returns the status of the machine's instance.
func (m *Machine) InstanceStatus(ctx context.Context) (params.StatusResult, error) {
	res, err := m.p.InstanceStatus(ctx, m.ents())
	if err != nil {
		return params.StatusResult{}, err
	}
	return res.Results[0], itemErr(res.Results[0].Error)
}

func (m *Machine) status(status, info string, data map[string]any) params.SetStatus {
	return params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: m.tag, Status: status, Info: info, Data: data}}}
}

// SetStatus sets the machine's agent status ("started", "error", ...).
func (m *Machine) SetStatus(ctx context.Context, status, info string, data map[string]any) error {
	return oneErr(m.p.SetStatus(ctx, m.status(status, info, data)))
}

// SetInstanceStatus sets the status of the machine's instance
// ("provisioning", "running", "provisioning error", ...).
func (m *Machine) SetInstanceStatus(ctx context.Context, status, info string, data map[string]any) error {
	return oneErr(m.p.SetInstanceStatus(ctx, m.status(status, info, data)))
}

// SetModificationStatus sets the status of changes to the machine.
func (m *Machine) SetModificationStatus(ctx context.Context, status, info string, data map[string]any) error {
	return oneErr(m.p.SetModificationStatus(ctx, m.status(status, info, data)))
}

// SetInstanceInfo records the machine's instance; info.Tag is set to the
// machine's. The machine's agent can log in once it is recorded, with its
// password and info.Nonce.
func (m *Machine) SetInstanceInfo(ctx context.Context, info params.InstanceInfo) error {
	info.Tag = m.tag
	return oneErr(m.p.SetInstanceInfo(ctx, params.InstancesInfo{Machines: []params.InstanceInfo{info}}))
}

// SetPassword sets the machine agent's password (at least 18 characters).
func (m *Machine) SetPassword(ctx context.Context, password string) error {
	return oneErr(m.p.SetPasswords(ctx, params.EntityPasswords{Changes: []params.EntityPassword{{Tag: m.tag, Password: password}}}))
}

// EnsureDead makes the machine dead.
func (m *Machine) EnsureDead(ctx context.Context) error { return oneErr(m.p.EnsureDead(ctx, m.ents())) }

// Remove removes the dead machine.
func (m *Machine) Remove(ctx context.Context) error { return oneErr(m.p.Remove(ctx, m.ents())) }

// MarkForRemoval marks the dead machine for removal.
func (m *Machine) MarkForRemoval(ctx context.Context) error {
	return oneErr(m.p.MarkMachinesForRemoval(ctx, m.ents()))
}

// AvailabilityZone returns the machine's availability zone.
func (m *Machine) AvailabilityZone(ctx context.Context) (string, error) {
	res, err := m.p.AvailabilityZone(ctx, m.ents())
	if err != nil {
		return "", err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// DistributionGroup returns the instance ids the machine should be spread
// from.
func (m *Machine) DistributionGroup(ctx context.Context) ([]string, error) {
	res, err := m.p.DistributionGroup(ctx, m.ents())
	if err != nil {
		return nil, err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// DistributionGroupByMachineId returns the machine ids the machine should
// be spread from.
func (m *Machine) DistributionGroupByMachineId(ctx context.Context) ([]string, error) {
	res, err := m.p.DistributionGroupByMachineId(ctx, m.ents())
	if err != nil {
		return nil, err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// KeepInstance reports whether the machine's instance is kept when the
// machine is removed.
func (m *Machine) KeepInstance(ctx context.Context) (bool, error) {
	res, err := m.p.KeepInstance(ctx, m.ents())
	if err != nil {
		return false, err
	}
	return res.Results[0].Result, itemErr(res.Results[0].Error)
}

// SupportedContainers returns the container types the machine supports,
// and whether it has reported them.
func (m *Machine) SupportedContainers(ctx context.Context) (types []string, determined bool, err error) {
	res, err := m.p.SupportedContainers(ctx, m.ents())
	if err != nil {
		return nil, false, err
	}
	r := res.Results[0]
	return r.ContainerTypes, r.Determined, itemErr(r.Error)
}

// SetSupportedContainers records the container types the machine supports
// (none: it supports no containers).
func (m *Machine) SetSupportedContainers(ctx context.Context, types ...string) error {
	if types == nil {
		types = []string{}
	}
	return oneErr(m.p.SetSupportedContainers(ctx, params.MachineContainersParams{
		Params: []params.MachineContainers{{MachineTag: m.tag, ContainerTypes: types}}}))
}

// SetCharmProfiles records the charm profiles applied to the machine.
func (m *Machine) SetCharmProfiles(ctx context.Context, profiles ...string) error {
	if profiles == nil {
		profiles = []string{}
	}
	return oneErr(m.p.SetCharmProfiles(ctx, params.SetProfileArgs{
		Args: []params.SetProfileArg{{Entity: params.Entity{Tag: m.tag}, Profiles: profiles}}}))
}

// Tools returns the agent binaries the machine should run.
func (m *Machine) Tools(ctx context.Context) ([]params.Tools, error) {
	res, err := m.p.Tools(ctx, m.ents())
	if err != nil {
		return nil, err
	}
	return res.Results[0].Tools, itemErr(res.Results[0].Error)
}

// WatchContainers watches the machine's containers of type ctype ("lxd",
// "kvm"); the first value lists them.
func (m *Machine) WatchContainers(ctx context.Context, ctype string) (*StringsWatch, error) {
	res, err := m.p.WatchContainers(ctx, params.WatchContainers{Params: []params.WatchContainer{{MachineTag: m.tag, ContainerType: ctype}}})
	if err != nil {
		return nil, err
	}
	return NewStringsWatch(m.p.f.c, res.Results[0])
}

// WatchAllContainers watches the machine's containers of every type.
func (m *Machine) WatchAllContainers(ctx context.Context) (*StringsWatch, error) {
	res, err := m.p.WatchAllContainers(ctx, params.WatchContainers{Params: []params.WatchContainer{{MachineTag: m.tag}}})
	if err != nil {
		return nil, err
	}
	return NewStringsWatch(m.p.f.c, res.Results[0])
}

// PrepareContainerInterfaceInfo allocates the container's addresses and
// returns its network config (called by the host's agent on a container).
func (m *Machine) PrepareContainerInterfaceInfo(ctx context.Context) ([]params.NetworkConfig, error) {
	res, err := m.p.PrepareContainerInterfaceInfo(ctx, m.ents())
	if err != nil {
		return nil, err
	}
	return res.Results[0].Config, itemErr(res.Results[0].Error)
}

// GetContainerInterfaceInfo returns the container's network config as
// prepared before.
func (m *Machine) GetContainerInterfaceInfo(ctx context.Context) ([]params.NetworkConfig, error) {
	res, err := m.p.GetContainerInterfaceInfo(ctx, m.ents())
	if err != nil {
		return nil, err
	}
	return res.Results[0].Config, itemErr(res.Results[0].Error)
}

// ReleaseContainerAddresses releases the container's addresses.
func (m *Machine) ReleaseContainerAddresses(ctx context.Context) error {
	return oneErr(m.p.ReleaseContainerAddresses(ctx, m.ents()))
}

// HostChangesForContainer returns the bridges the container's host needs
// and how long to wait after making them.
func (m *Machine) HostChangesForContainer(ctx context.Context) ([]params.DeviceBridgeInfo, int, error) {
	res, err := m.p.HostChangesForContainers(ctx, m.ents())
	if err != nil {
		return nil, 0, err
	}
	r := res.Results[0]
	return r.NewBridges, r.ReconfigureDelay, itemErr(r.Error)
}

// ContainerProfileInfo returns the LXD profiles the container needs.
func (m *Machine) ContainerProfileInfo(ctx context.Context) ([]params.ContainerLXDProfile, error) {
	res, err := m.p.GetContainerProfileInfo(ctx, m.ents())
	if err != nil {
		return nil, err
	}
	return res.Results[0].LXDProfiles, itemErr(res.Results[0].Error)
}

// SetObservedNetworkConfig records the network config the machine
// observed.
func (m *Machine) SetObservedNetworkConfig(ctx context.Context, config []params.NetworkConfig) error {
	return m.p.SetObservedNetworkConfig(ctx, params.SetMachineNetworkConfig{Tag: m.tag, Config: config})
}

// SetHostMachineNetworkConfig records the machine's network config as a
// container host.
func (m *Machine) SetHostMachineNetworkConfig(ctx context.Context, config []params.NetworkConfig) error {
	return m.p.SetHostMachineNetworkConfig(ctx, params.SetMachineNetworkConfig{Tag: m.tag, Config: config})
}
