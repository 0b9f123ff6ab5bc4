package modeladmin

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func registerNetwork(m *methods) {
	rpc.Handle(m, "AddSpace", (*ModelAdmin).AddSpace)
	rpc.Handle(m, "Spaces", (*ModelAdmin).Spaces)
	rpc.Handle(m, "AddSubnet", (*ModelAdmin).AddSubnet)
	rpc.Handle(m, "Subnets", (*ModelAdmin).Subnets)
}

// MaxVLANTag is the largest 802.1Q VLAN id.
const MaxVLANTag = 4094

var (
	validZone       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	validProviderID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)
)

// aliveModel resolves a model that may take new entities: a dying model
// accepts none (it is removed with its last one).
func (a *ModelAdmin) aliveModel(ctx context.Context, name, what string) (state.Model, error) {
	m, err := a.model(ctx, name)
	if err != nil {
		return m, err
	}
	if m.Life != state.Alive {
		return m, errors.NewNotValid(nil, fmt.Sprintf("adding %s to %s model %q", what, m.Life, m.Name))
	}
	return m, nil
}

func checkProviderID(what, id string) error {
	if !validProviderID.MatchString(id) {
		return errors.NewNotValid(nil, fmt.Sprintf("%s provider id %q not valid: letters, digits and . _ : / -, at most 128", what, id))
	}
	return nil
}

// AddSpace adds a space to a model. Names are Juju's: lowercase letters,
// digits and hyphens.
func (a *ModelAdmin) AddSpace(ctx context.Context, args params.AddSpaceArgs) (params.SpaceInfo, error) {
	m, err := a.aliveModel(ctx, args.Model, "a space")
	if err != nil {
		return params.SpaceInfo{}, err
	}
	if args.ProviderID != "" {
		if err := checkProviderID("space", args.ProviderID); err != nil {
			return params.SpaceInfo{}, err
		}
	}
	s, err := a.st.AddSpace(ctx, m.UUID, args.Name, args.ProviderID)
	if err != nil {
		return params.SpaceInfo{}, err
	}
	return params.SpaceInfo{Name: s.Name, ProviderID: s.ProviderID, Subnets: []string{}}, nil
}

// Spaces lists a model's spaces with their subnets.
func (a *ModelAdmin) Spaces(ctx context.Context, args params.ModelArgs) (params.SpacesResult, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.SpacesResult{}, err
	}
	spaces, subnets, err := a.spacesAndSubnets(ctx, m)
	if err != nil {
		return params.SpacesResult{}, err
	}
	return params.SpacesResult{Spaces: spaceInfos(spaces, subnets)}, nil
}

func (a *ModelAdmin) spacesAndSubnets(ctx context.Context, m state.Model) ([]state.Space, []state.Subnet, error) {
	spaces, err := a.st.Spaces(ctx, m.UUID)
	if err != nil {
		return nil, nil, err
	}
	subnets, err := a.st.Subnets(ctx, m.UUID)
	return spaces, subnets, err
}

func spaceInfos(spaces []state.Space, subnets []state.Subnet) []params.SpaceInfo {
	out := make([]params.SpaceInfo, len(spaces))
	for i, s := range spaces {
		out[i] = params.SpaceInfo{Name: s.Name, ProviderID: s.ProviderID, Subnets: []string{}}
		for _, sn := range subnets {
			if sn.SpaceName == s.Name {
				out[i].Subnets = append(out[i].Subnets, sn.CIDR)
			}
		}
	}
	return out
}

// AddSubnet adds a subnet the built-in provider allocates container
// addresses from. The CIDR must be in canonical form (10.0.0.0/24) and
// overlap no other subnet of the model; the space must exist; at least one
// availability zone and a provider id (unique in the model) are required;
// the VLAN tag is 0 (none) to 4094; the allocatable range "LOW-HIGH" must
// lie inside the CIDR (without it the subnet hands out no addresses).
func (a *ModelAdmin) AddSubnet(ctx context.Context, args params.AddSubnetArgs) (params.SubnetInfo, error) {
	m, err := a.aliveModel(ctx, args.Model, "a subnet")
	if err != nil {
		return params.SubnetInfo{}, err
	}
	if args.Space == "" {
		return params.SubnetInfo{}, errors.NewNotValid(nil, "subnet needs a space")
	}
	if len(args.Zones) == 0 {
		return params.SubnetInfo{}, errors.NewNotValid(nil, "subnet needs at least one availability zone")
	}
	for i, z := range args.Zones {
		if !validZone.MatchString(z) {
			return params.SubnetInfo{}, errors.NewNotValid(nil, fmt.Sprintf("zone %q not valid: letters, digits and . _ -, at most 63", z))
		}
		if slices.Contains(args.Zones[:i], z) {
			return params.SubnetInfo{}, errors.NewNotValid(nil, fmt.Sprintf("zone %q given twice", z))
		}
	}
	if args.ProviderID == "" {
		return params.SubnetInfo{}, errors.NewNotValid(nil, "subnet needs a provider id")
	}
	if err := checkProviderID("subnet", args.ProviderID); err != nil {
		return params.SubnetInfo{}, err
	}
	if args.VLANTag < 0 || args.VLANTag > MaxVLANTag {
		return params.SubnetInfo{}, errors.NewNotValid(nil, fmt.Sprintf("VLAN tag %d: want 0 to %d", args.VLANTag, MaxVLANTag))
	}
	s := state.Subnet{CIDR: args.CIDR, SpaceName: args.Space, Zones: args.Zones, ProviderID: args.ProviderID, VLANTag: args.VLANTag}
	if args.AllocatableRange != "" {
		low, high, ok := strings.Cut(args.AllocatableRange, "-")
		if !ok || low == "" || high == "" {
			return params.SubnetInfo{}, errors.NewNotValid(nil, fmt.Sprintf("allocatable range %q not valid: want LOW-HIGH", args.AllocatableRange))
		}
		s.AllocatableIPLow, s.AllocatableIPHigh = low, high
	}
	added, err := a.st.AddSubnet(ctx, m.UUID, s)
	if err != nil {
		return params.SubnetInfo{}, err
	}
	return subnetInfo(added, nil), nil
}

// Subnets lists a model's subnets and the addresses in use in each.
func (a *ModelAdmin) Subnets(ctx context.Context, args params.ModelArgs) (params.SubnetsResult, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.SubnetsResult{}, err
	}
	subnets, err := a.subnetInfos(ctx, m)
	if err != nil {
		return params.SubnetsResult{}, err
	}
	return params.SubnetsResult{Subnets: subnets}, nil
}

func (a *ModelAdmin) subnetInfos(ctx context.Context, m state.Model) ([]params.SubnetInfo, error) {
	subnets, err := a.st.Subnets(ctx, m.UUID)
	if err != nil {
		return nil, err
	}
	addrs, err := a.st.IPAddresses(ctx, m.UUID)
	if err != nil {
		return nil, err
	}
	out := make([]params.SubnetInfo, len(subnets))
	for i, s := range subnets {
		out[i] = subnetInfo(s, addrs)
	}
	return out, nil
}

func subnetInfo(s state.Subnet, addrs []state.IPAddress) params.SubnetInfo {
	info := params.SubnetInfo{
		CIDR: s.CIDR, Space: s.SpaceName, Zones: slices.Clone(s.Zones), ProviderID: s.ProviderID,
		VLANTag: s.VLANTag, AllocatableIPLow: s.AllocatableIPLow, AllocatableIPHigh: s.AllocatableIPHigh,
		Gateway: s.Environ().GatewayAddress(), Life: string(s.Life), Addresses: []params.AddressInfo{},
	}
	if info.Zones == nil {
		info.Zones = []string{}
	}
	for _, ad := range addrs {
		if ad.SubnetCIDR == s.CIDR {
			info.Addresses = append(info.Addresses, params.AddressInfo{Value: ad.Value, Subnet: ad.SubnetCIDR,
				Machine: ad.MachineID, State: ad.State, InterfaceName: ad.InterfaceName, MACAddress: ad.MACAddress})
		}
	}
	slices.SortFunc(info.Addresses, func(x, y params.AddressInfo) int {
		ax, errX := netip.ParseAddr(x.Value)
		ay, errY := netip.ParseAddr(y.Value)
		if errX != nil || errY != nil {
			return strings.Compare(x.Value, y.Value)
		}
		return ax.Compare(ay)
	})
	return info
}
