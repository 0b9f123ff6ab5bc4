package environ

import (
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"sync"
)

// MACAddressTemplate is the form of the MAC addresses handed to containers
// (the range Juju uses).
const MACAddressTemplate = "00:16:3e:%02x:%02x:%02x"

// GenerateMACAddress returns a random MAC address in MACAddressTemplate.
func GenerateMACAddress() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf(MACAddressTemplate, b[0], b[1], b[2])
}

// hostMAC is the stable MAC address of a host's device index i.
func hostMAC(instanceID string, i int) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", instanceID, i)
	s := h.Sum32()
	return fmt.Sprintf(MACAddressTemplate, byte(s>>16), byte(s>>8), byte(s))
}

// Subnet is a subnet the operator added, as the provider sees it.
type Subnet struct {
	CIDR              string
	ProviderID        string
	ProviderNetworkID string
	VLANTag           int
	AllocatableIPLow  string
	AllocatableIPHigh string
	Zones             []string
	SpaceName         string
	Gateway           string // "" = the first address of the CIDR
	DNSServers        []string
}

// GatewayAddress returns the subnet's gateway (the host's address on it).
func (s Subnet) GatewayAddress() string {
	if s.Gateway != "" {
		return s.Gateway
	}
	p, err := netip.ParsePrefix(s.CIDR)
	if err != nil {
		return ""
	}
	return DefaultGateway(p).String()
}

// InterfaceInfo is one network interface of a host or a container.
type InterfaceInfo struct {
	DeviceIndex       int
	MACAddress        string
	CIDR              string
	NetworkName       string // the space name
	ProviderID        string
	ProviderSubnetID  string
	ProviderNetworkID string
	VLANTag           int
	InterfaceName     string
	Disabled          bool
	NoAutoStart       bool
	DNSServers        []string
	ConfigType        string // "static" or "dhcp"
	Address           string
	GatewayAddress    string
}

// Provider is the built-in provider. The zero value is not usable: use New.
// It is safe for concurrent use.
type Provider struct {
	mu sync.Mutex
	// allocateHook, if set, may fail AllocateAddress (tests inject
	// provider failures with it).
	allocateHook func(instanceID, subnetCIDR, addr, mac, hostname string) error
	released     []string
}

// New returns the built-in provider.
func New() *Provider { return &Provider{} }

// Type is the provider type reported as a model's "type" when it has none.
const Type = "builtin"

// ErrNoInterfaces and friends are the reasons a host cannot get container
// addresses; facades annotate them.
var (
	ErrNoInterfaces = errors.New("no interfaces available")
	ErrNoSubnets    = errors.New("no subnets available")
)

// SetAllocateHook installs a hook that may fail AllocateAddress (tests).
func (p *Provider) SetAllocateHook(h func(instanceID, subnetCIDR, addr, mac, hostname string) error) {
	p.mu.Lock()
	p.allocateHook = h
	p.mu.Unlock()
}

// HostSubnets returns the subnets a host in zone is attached to: those
// naming the zone, or with no zones; all of them when zone is "". Order is
// kept.
func HostSubnets(zone string, subnets []Subnet) []Subnet {
	var out []Subnet
	for _, s := range subnets {
		if zone == "" || len(s.Zones) == 0 || slices.Contains(s.Zones, zone) {
			out = append(out, s)
		}
	}
	return out
}

// NetworkInterfaces returns the interfaces of a provisioned host: eth0,
// eth1, ... one per subnet it is attached to, each with the subnet's
// gateway as its address (the host is the containers' gateway).
func (p *Provider) NetworkInterfaces(instanceID string, subnets []Subnet) []InterfaceInfo {
	out := make([]InterfaceInfo, 0, len(subnets))
	for i, s := range subnets {
		out = append(out, InterfaceInfo{
			DeviceIndex:       i,
			MACAddress:        hostMAC(instanceID, i),
			CIDR:              s.CIDR,
			NetworkName:       s.SpaceName,
			ProviderID:        fmt.Sprintf("%s-nic-%d", instanceID, i),
			ProviderSubnetID:  s.ProviderID,
			ProviderNetworkID: s.ProviderNetworkID,
			VLANTag:           s.VLANTag,
			InterfaceName:     fmt.Sprintf("eth%d", i),
			DNSServers:        slices.Clone(s.DNSServers),
			ConfigType:        "static",
			Address:           s.GatewayAddress(),
		})
	}
	return out
}

// SupportsAddressAllocation reports whether containers can get addresses
// from s: it must have a valid allocatable range.
func (p *Provider) SupportsAddressAllocation(s Subnet) bool {
	_, r, err := ParseRange(s.CIDR, s.AllocatableIPLow, s.AllocatableIPHigh)
	return err == nil && r.Valid()
}

// AnySupportsAddressAllocation reports whether any subnet does (the
// "AnySubnet" question of ContainerManagerConfig).
func (p *Provider) AnySupportsAddressAllocation(subnets []Subnet) bool {
	for _, s := range subnets {
		if p.SupportsAddressAllocation(s) {
			return true
		}
	}
	return false
}

// AllocationSubnet picks the subnet container addresses come from: the
// first of the host's interfaces' subnets that supports allocation.
func (p *Provider) AllocationSubnet(ifaces []InterfaceInfo, subnets []Subnet) (Subnet, InterfaceInfo, error) {
	if len(ifaces) == 0 {
		return Subnet{}, InterfaceInfo{}, ErrNoInterfaces
	}
	if len(subnets) == 0 {
		return Subnet{}, InterfaceInfo{}, ErrNoSubnets
	}
	for _, iface := range ifaces {
		if iface.Disabled {
			continue
		}
		for _, s := range subnets {
			if s.CIDR == iface.CIDR && p.SupportsAddressAllocation(s) {
				return s, iface, nil
			}
		}
	}
	return Subnet{}, InterfaceInfo{}, ErrAllocationNotSupported
}

// ErrAllocationNotSupported: no subnet of the host has an allocatable range.
var ErrAllocationNotSupported = errors.New("address allocation on any available subnets is not supported")

// AllocateAddress asks the provider to route addr to the host for a
// container. The built-in provider accepts every request.
func (p *Provider) AllocateAddress(instanceID, subnetCIDR, addr, mac, hostname string) error {
	p.mu.Lock()
	h := p.allocateHook
	p.mu.Unlock()
	if h != nil {
		return h(instanceID, subnetCIDR, addr, mac, hostname)
	}
	return nil
}

// maxReleased bounds the record of released addresses kept for Released.
const maxReleased = 256

// ReleaseAddress gives addr back to the provider.
func (p *Provider) ReleaseAddress(instanceID, subnetCIDR, addr, mac string) error {
	p.mu.Lock()
	p.released = append(p.released, addr)
	if len(p.released) > maxReleased {
		p.released = slices.Clone(p.released[len(p.released)-maxReleased:])
	}
	p.mu.Unlock()
	return nil
}

// Address is an address the provider routed to a host for one of its
// containers: what releasing it names.
type Address struct {
	SubnetCIDR, Value, MAC string
}

// ReleaseAddresses gives addrs, routed to host instanceID, back to the
// provider, each with ReleaseAddress; it goes on past a failure and
// returns every failure joined.
func (p *Provider) ReleaseAddresses(instanceID string, addrs []Address) error {
	var errs []error
	for _, a := range addrs {
		if err := p.ReleaseAddress(instanceID, a.SubnetCIDR, a.Value, a.MAC); err != nil {
			errs = append(errs, fmt.Errorf("releasing %s: %w", a.Value, err))
		}
	}
	return errors.Join(errs...)
}

// Released lists the last addresses released (at most 256; for tests and
// debugging).
func (p *Provider) Released() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.released)
}

// AvailabilityZones returns the sorted zones the subnets name.
func AvailabilityZones(subnets []Subnet) []string {
	var zones []string
	for _, s := range subnets {
		for _, z := range s.Zones {
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	slices.Sort(zones)
	return zones
}
