package provisioner

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// hostNetwork is what the container networking methods work with: the
// caller's own machine (the host), its interfaces at the provider, and the
// subnet container addresses come from.
type hostNetwork struct {
	host    state.Machine
	ifaces  []environ.InterfaceInfo
	subnets []environ.Subnet
	// subnet and iface are the allocation subnet and the host interface
	// on it; ok is false when no subnet supports allocation.
	subnet environ.Subnet
	iface  environ.InterfaceInfo
	ok     bool
}

// hostNetwork checks the call-level preconditions: the host is the caller's
// own machine of this model and is provisioned. what names the operation in
// v11 messages ("network" or "LXD profile").
func (p *Provisioner) hostNetwork(ctx context.Context, what string) (*hostNetwork, error) {
	prefix := "cannot allocate addresses"
	if !p.v1 {
		prefix = fmt.Sprintf("cannot prepare container %s config", what)
	}
	if !p.ctx.IsModelMachine() {
		return nil, facade.ErrPerm
	}
	host, err := p.st.Machine(ctx, p.model, p.ctx.Auth.Tag.Id())
	if err != nil {
		return nil, err
	}
	if !host.Provisioned() {
		return nil, errors.NewNotProvisioned(nil, fmt.Sprintf("%s: host machine %q not provisioned", prefix, host.ID))
	}
	all, err := p.environSubnets(ctx)
	if err != nil {
		return nil, err
	}
	zone := ""
	if host.Hardware != nil && host.Hardware.AvailabilityZone != nil {
		zone = *host.Hardware.AvailabilityZone
	}
	hn := &hostNetwork{host: host, subnets: environ.HostSubnets(zone, all)}
	hn.ifaces = p.env.NetworkInterfaces(host.InstanceID, hn.subnets)
	hn.subnet, hn.iface, err = p.env.AllocationSubnet(hn.ifaces, hn.subnets)
	switch {
	case err == nil:
		hn.ok = true
	case p.v1 && errors.Is(err, environ.ErrAllocationNotSupported):
		return nil, errors.NewNotSupported(nil, prefix+": "+err.Error())
	case p.v1:
		return nil, errors.Annotate(err, prefix)
	}
	return hn, nil
}

// container is the per-item check of the container networking methods: the
// tag's parse error text, the accessor checks, and "not a container".
func (p *Provisioner) container(ctx context.Context, tag, notContainer string) (state.Machine, error) {
	c, err := p.machine(ctx, tag, machineTagsParseErrors)
	if err != nil {
		return state.Machine{}, err
	}
	if !c.IsContainer() {
		return state.Machine{}, errors.Errorf("%s for %q: not a container", notContainer, tag)
	}
	return c, nil
}

func (p *Provisioner) notContainerText() string {
	if p.v1 {
		return "cannot allocate address"
	}
	return "cannot prepare network config"
}

// PrepareContainerInterfaceInfo allocates each container an address from
// the host's allocation subnet and returns its network config. A container
// that already has an address keeps it.
func (p *Provisioner) PrepareContainerInterfaceInfo(ctx context.Context, args params.Entities) (params.MachineNetworkConfigResults, error) {
	return p.containerInterfaceInfo(ctx, args, true)
}

// GetContainerInterfaceInfo returns each container's network config.
func (p *Provisioner) GetContainerInterfaceInfo(ctx context.Context, args params.Entities) (params.MachineNetworkConfigResults, error) {
	return p.containerInterfaceInfo(ctx, args, false)
}

func (p *Provisioner) containerInterfaceInfo(ctx context.Context, args params.Entities, prepare bool) (params.MachineNetworkConfigResults, error) {
	res := params.MachineNetworkConfigResults{Results: make([]params.MachineNetworkConfigResult, len(args.Entities))}
	hn, err := p.hostNetwork(ctx, "network")
	if err != nil {
		return res, err
	}
	res.Results = facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.MachineNetworkConfigResult, error) {
		c, err := p.container(ctx, e.Tag, p.notContainerText())
		if err != nil {
			return params.MachineNetworkConfigResult{}, err
		}
		// 2015: Prepare refuses a provisioned container; v11: Get does.
		if c.Provisioned() && prepare == p.v1 {
			return params.MachineNetworkConfigResult{}, errors.Errorf("container %q already provisioned as %q", c.ID, c.InstanceID)
		}
		if !hn.ok {
			// No allocation (v11): the container's NIC uses DHCP.
			return params.MachineNetworkConfigResult{Config: []params.NetworkConfig{dhcpConfig(hn)}}, nil
		}
		var addr state.IPAddress
		if p.v1 && !prepare {
			addrs, err := p.st.MachineAddresses(ctx, p.model, c.ID)
			if err != nil {
				return params.MachineNetworkConfigResult{}, err
			}
			if len(addrs) != 1 {
				return params.MachineNetworkConfigResult{}, errors.Errorf("expected 1 address for container %q, got %d", c.ID, len(addrs))
			}
			addr = addrs[0]
		} else {
			addr, err = p.allocate(ctx, hn, c)
			if err != nil {
				return params.MachineNetworkConfigResult{}, err
			}
		}
		return params.MachineNetworkConfigResult{Config: []params.NetworkConfig{staticConfig(hn, addr)}}, nil
	})
	return res, nil
}

// allocate returns the container's address on the allocation subnet,
// allocating one if it has none: a random free address, which the provider
// must accept (an address it refuses is marked unavailable and another one
// tried).
func (p *Provisioner) allocate(ctx context.Context, hn *hostNetwork, c state.Machine) (state.IPAddress, error) {
	existing, err := p.st.MachineAddresses(ctx, p.model, c.ID)
	if err != nil {
		return state.IPAddress{}, err
	}
	for _, a := range existing {
		if a.SubnetCIDR == hn.subnet.CIDR {
			return a, nil
		}
	}
	mac := environ.GenerateMACAddress()
	var refused error
	for range maxProviderRefusals {
		var b [8]byte
		_, _ = rand.Read(b[:])
		addr, err := p.st.AllocateAddress(ctx, p.model, hn.subnet.CIDR, c.ID, hn.iface.InterfaceName, mac, binary.BigEndian.Uint64(b[:]))
		if err != nil {
			return state.IPAddress{}, errors.Annotatef(err, "failed to allocate an address for %q", c.ID)
		}
		err = p.env.AllocateAddress(hn.host.InstanceID, hn.subnet.CIDR, addr.Value, mac, c.Tag().String())
		if err == nil {
			return addr, nil
		}
		refused = err
		p.ctx.Deps.Logger.Warn("provider refused address; marking it unavailable", "address", addr.Value, "err", err)
		if err := p.st.SetAddressUnavailable(ctx, p.model, addr.Value); err != nil {
			p.ctx.Deps.Logger.Warn("cannot mark address unavailable", "address", addr.Value, "err", err)
		}
	}
	return state.IPAddress{}, errors.Annotatef(refused, "failed to allocate an address for %q: the provider refused %d addresses", c.ID, maxProviderRefusals)
}

// maxProviderRefusals bounds the addresses one allocation may burn (mark
// unavailable) when the provider keeps refusing them.
const maxProviderRefusals = 8

func addrType(v string) string {
	if a, err := netip.ParseAddr(v); err == nil && a.Is6() {
		return "ipv6"
	}
	return "ipv4"
}

func staticConfig(hn *hostNetwork, addr state.IPAddress) params.NetworkConfig {
	nc := baseConfig(hn)
	nc.MACAddress = addr.MACAddress
	nc.ConfigType = "static"
	nc.Address = addr.Value
	nc.Addresses = []params.Address{{Value: addr.Value, Type: addrType(addr.Value), Scope: "local-cloud",
		CIDR: hn.subnet.CIDR, ConfigType: "static", SpaceName: hn.subnet.SpaceName}}
	nc.GatewayAddress = hn.iface.Address
	return nc
}

func dhcpConfig(hn *hostNetwork) params.NetworkConfig {
	nc := baseConfig(hn)
	nc.MACAddress = environ.GenerateMACAddress()
	nc.ConfigType = "dhcp"
	if len(hn.ifaces) > 0 {
		nc.ParentInterfaceName = "br-" + hn.ifaces[0].InterfaceName
	}
	return nc
}

func baseConfig(hn *hostNetwork) params.NetworkConfig {
	nc := params.NetworkConfig{
		DeviceIndex:       0,
		CIDR:              hn.subnet.CIDR,
		ProviderSubnetId:  hn.subnet.ProviderID,
		ProviderNetworkId: hn.subnet.ProviderNetworkID,
		VLANTag:           hn.subnet.VLANTag,
		InterfaceName:     "eth0",
		InterfaceType:     "ethernet",
		DNSServers:        hn.subnet.DNSServers,
	}
	if hn.iface.InterfaceName != "" {
		nc.ParentInterfaceName = "br-" + hn.iface.InterfaceName
	}
	return nc
}

// ReleaseContainerAddresses frees the addresses of each container.
func (p *Provisioner) ReleaseContainerAddresses(ctx context.Context, args params.Entities) (params.ErrorResults, error) {
	return params.ErrorResults{Results: facade.Bulk(ctx, args.Entities, facade.ErrorOnly(func(e params.Entity) error {
		c, err := p.machine(ctx, e.Tag, machineTags)
		if err != nil {
			return err
		}
		if !c.IsContainer() {
			return errors.Errorf("cannot mark addresses for removal for %q: not a container", e.Tag)
		}
		released, err := p.st.ReleaseMachineAddresses(ctx, p.model, c.ID)
		if err != nil {
			return errors.Annotatef(err, "failed to mark all addresses for removal for %q", e.Tag)
		}
		p.releaseAtProvider(ctx, c, released)
		return nil
	}))}, nil
}

// releaseAtProvider tells the provider a removed machine's addresses are
// free (best effort: failures are logged).
func (p *Provisioner) releaseAtProvider(ctx context.Context, m state.Machine, released []state.IPAddress) {
	if len(released) == 0 {
		return
	}
	instance := ""
	if parent, err := p.st.Machine(ctx, p.model, state.ParentID(m.ID)); err == nil {
		instance = parent.InstanceID
	}
	if err := p.env.ReleaseAddresses(instance, state.EnvironAddresses(released)); err != nil {
		p.ctx.Deps.Logger.Warn("cannot release addresses at the provider", "machine", m.ID, "err", err)
	}
}

// HostChangesForContainers returns, for each container, the bridges its
// host still needs: one per host interface not yet bridged.
func (p *Provisioner) HostChangesForContainers(ctx context.Context, args params.Entities) (params.HostNetworkChangeResults, error) {
	res := params.HostNetworkChangeResults{Results: make([]params.HostNetworkChange, len(args.Entities))}
	hn, err := p.hostNetwork(ctx, "network")
	if err != nil {
		return res, err
	}
	_, cfg, err := p.modelConfig(ctx)
	if err != nil {
		return res, err
	}
	delay := 17
	if v, ok := cfg["net-bond-reconfigure-delay"].(float64); ok {
		delay = int(v)
	}
	res.Results = facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.HostNetworkChange, error) {
		if _, err := p.container(ctx, e.Tag, "cannot prepare network config"); err != nil {
			return params.HostNetworkChange{NewBridges: []params.DeviceBridgeInfo{}}, err
		}
		bridges := []params.DeviceBridgeInfo{}
		for _, iface := range hn.ifaces {
			name := "br-" + iface.InterfaceName
			bridged := false
			for _, d := range hn.host.LinkLayerDevices {
				if d.Name == name {
					bridged = true
				}
			}
			if !bridged {
				bridges = append(bridges, params.DeviceBridgeInfo{HostDeviceName: iface.InterfaceName,
					BridgeName: name, MACAddress: iface.MACAddress})
			}
		}
		return params.HostNetworkChange{NewBridges: bridges, ReconfigureDelay: delay}, nil
	})
	return res, nil
}

// GetContainerProfileInfo returns, for each container, the LXD profiles of
// the charms of the units placed on it.
func (p *Provisioner) GetContainerProfileInfo(ctx context.Context, args params.Entities) (params.ContainerProfileResults, error) {
	res := params.ContainerProfileResults{Results: make([]params.ContainerProfileResult, len(args.Entities))}
	if _, err := p.hostNetwork(ctx, "LXD profile"); err != nil {
		return res, err
	}
	m, err := p.st.Model(ctx, p.model)
	if err != nil {
		return res, err
	}
	res.Results = facade.Bulk(ctx, args.Entities, func(e params.Entity) (params.ContainerProfileResult, error) {
		c, err := p.container(ctx, e.Tag, "cannot prepare network config")
		if err != nil {
			return params.ContainerProfileResult{}, err
		}
		units, err := p.st.UnitsOnMachine(ctx, p.model, c.ID)
		if err != nil {
			return params.ContainerProfileResult{}, err
		}
		var out []params.ContainerLXDProfile
		seen := map[string]bool{}
		for _, u := range units {
			if seen[u.Application] {
				continue
			}
			seen[u.Application] = true
			app, err := p.st.Application(ctx, p.model, u.Application)
			if err != nil {
				return params.ContainerProfileResult{}, err
			}
			if app.LXDProfile == nil {
				continue
			}
			out = append(out, params.ContainerLXDProfile{
				Name: profileName(m.Name, app),
				Profile: params.CharmLXDProfile{Config: app.LXDProfile.Config, Description: app.LXDProfile.Description,
					Devices: app.LXDProfile.Devices},
			})
		}
		return params.ContainerProfileResult{LXDProfiles: out}, nil
	})
	return res, nil
}

// profileName is the name of an application's LXD profile.
func profileName(model string, app state.Application) string {
	return fmt.Sprintf("juju-%s-%s-%d", model, app.Name, app.CharmRevision)
}
