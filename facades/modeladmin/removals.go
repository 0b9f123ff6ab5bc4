package modeladmin

import (
	"context"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
)

func registerRemovals(m *methods) {
	rpc.Handle(m, "RemoveSpace", (*ModelAdmin).RemoveSpace)
	rpc.Handle(m, "RemoveSubnet", (*ModelAdmin).RemoveSubnet)
	rpc.Handle(m, "RemoveAgentBinaries", (*ModelAdmin).RemoveAgentBinaries)
}

// RemoveSpace removes a space. One that holds subnets, or that constraints
// or endpoint bindings name, is refused (code "not valid"), and nothing
// changes. It returns the removed space.
func (a *ModelAdmin) RemoveSpace(ctx context.Context, args params.RemoveSpaceArgs) (params.SpaceInfo, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.SpaceInfo{}, err
	}
	if args.Name == "" {
		return params.SpaceInfo{}, errors.NewNotValid(nil, "space name is required")
	}
	s, err := a.st.Space(ctx, m.UUID, args.Name)
	if err != nil {
		return params.SpaceInfo{}, err
	}
	if err := a.st.RemoveSpace(ctx, m.UUID, args.Name); err != nil {
		return params.SpaceInfo{}, err
	}
	return params.SpaceInfo{Name: s.Name, ProviderID: s.ProviderID, Subnets: []string{}}, nil
}

// RemoveSubnet removes a subnet. One with addresses in use is refused
// (code "not valid"). It returns the removed subnet.
func (a *ModelAdmin) RemoveSubnet(ctx context.Context, args params.RemoveSubnetArgs) (params.SubnetInfo, error) {
	m, err := a.model(ctx, args.Model)
	if err != nil {
		return params.SubnetInfo{}, err
	}
	if args.CIDR == "" {
		return params.SubnetInfo{}, errors.NewNotValid(nil, "subnet CIDR is required")
	}
	subnets, err := a.st.Subnets(ctx, m.UUID)
	if err != nil {
		return params.SubnetInfo{}, err
	}
	for _, s := range subnets {
		if s.CIDR != args.CIDR {
			continue
		}
		if err := a.st.RemoveSubnet(ctx, m.UUID, args.CIDR); err != nil {
			return params.SubnetInfo{}, err
		}
		info := subnetInfo(s, nil)
		info.Life = "dead"
		return info, nil
	}
	return params.SubnetInfo{}, errors.NotFoundf("subnet %q", args.CIDR)
}

// RemoveAgentBinaries removes one entry ("3.3.0-ubuntu-amd64") of the
// controller's agent binaries catalog. It returns the removed entry.
func (a *ModelAdmin) RemoveAgentBinaries(ctx context.Context, args params.RemoveAgentBinariesArgs) (params.AgentBinaryInfo, error) {
	if args.Version == "" {
		return params.AgentBinaryInfo{}, errors.NewNotValid(nil, "agent binaries version is required (VERSION-OS-ARCH, such as 3.3.0-ubuntu-amd64)")
	}
	cat, err := a.st.AgentBinaryCatalog(ctx)
	if err != nil {
		return params.AgentBinaryInfo{}, err
	}
	for _, b := range cat {
		if b.Version != args.Version {
			continue
		}
		if err := a.st.RemoveAgentBinary(ctx, b.Version); err != nil {
			return params.AgentBinaryInfo{}, err
		}
		return params.AgentBinaryInfo{Version: b.Version, URL: b.URL, SHA256: b.SHA256, Size: b.Size}, nil
	}
	return params.AgentBinaryInfo{}, errors.NotFoundf("agent binaries %q", args.Version)
}
