package state

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/watcher"
)

// Space is a named set of subnets.
type Space struct {
	Model      string `json:"model"`
	Name       string `json:"name"`
	ProviderID string `json:"provider-id,omitempty"`
}

type spaceDoc struct {
	Space
}

// Subnet is a subnet the operator added, keyed by CIDR.
type Subnet struct {
	Model             string   `json:"model"`
	CIDR              string   `json:"cidr"`
	ProviderID        string   `json:"provider-id,omitempty"`
	ProviderNetworkID string   `json:"provider-network-id,omitempty"`
	VLANTag           int      `json:"vlan-tag,omitempty"`
	AllocatableIPLow  string   `json:"allocatable-ip-low,omitempty"`
	AllocatableIPHigh string   `json:"allocatable-ip-high,omitempty"`
	Zones             []string `json:"zones,omitempty"`
	SpaceName         string   `json:"space-name,omitempty"`
	Gateway           string   `json:"gateway,omitempty"`
	DNSServers        []string `json:"dns-servers,omitempty"`
	Life              Life     `json:"life"`
}

type subnetDoc struct {
	Subnet
}

// Environ returns the subnet as the built-in provider sees it.
func (s Subnet) Environ() environ.Subnet {
	return environ.Subnet{
		CIDR: s.CIDR, ProviderID: s.ProviderID, ProviderNetworkID: s.ProviderNetworkID,
		VLANTag: s.VLANTag, AllocatableIPLow: s.AllocatableIPLow, AllocatableIPHigh: s.AllocatableIPHigh,
		Zones: slices.Clone(s.Zones), SpaceName: s.SpaceName, Gateway: s.Gateway,
		DNSServers: slices.Clone(s.DNSServers),
	}
}

// IP address states (2015 state.AddressState).
const (
	AddressStateUnknown     = ""
	AddressStateAllocated   = "allocated"
	AddressStateUnavailable = "unavailable"
)

// IPAddress is an address of a subnet handed to a container (allocated)
// or taken out of use (unavailable), keyed by its value.
type IPAddress struct {
	Model         string `json:"model"`
	Value         string `json:"value"`
	SubnetCIDR    string `json:"subnet"`
	State         string `json:"state"`
	MachineID     string `json:"machine-id,omitempty"`
	InterfaceName string `json:"interface-name,omitempty"`
	MACAddress    string `json:"mac-address,omitempty"`
	Life          Life   `json:"life"`
}

type ipAddressDoc struct {
	IPAddress
}

// EnvironAddresses returns addresses as the built-in provider names them
// (to release them there).
func EnvironAddresses(as []IPAddress) []environ.Address {
	out := make([]environ.Address, len(as))
	for i, a := range as {
		out[i] = environ.Address{SubnetCIDR: a.SubnetCIDR, Value: a.Value, MAC: a.MACAddress}
	}
	return out
}

var validSpaceName = validApplicationName

// AddSpace adds a space to a model.
func (st *State) AddSpace(ctx context.Context, model, name, providerID string) (Space, error) {
	if !validSpaceName.MatchString(name) {
		return Space{}, errors.NewNotValid(nil, fmt.Sprintf("space name %q not valid: %s", name, applicationNameRule))
	}
	s := Space{Model: model, Name: name, ProviderID: providerID}
	err := st.update(ctx, func(tx *txn) error {
		if _, err := getModelHead(tx, model); err != nil {
			return err
		}
		if ok, err := exists(tx, KindSpace, model, name); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("space %q", name)
		}
		return tx.put(KindSpace, model, name, &spaceDoc{Space: s}, watcher.FieldCreated)
	})
	return s, err
}

func getSpace(r reader, model, name string) (Space, error) {
	var d spaceDoc
	ok, err := get(r, KindSpace, model, name, &d)
	if err != nil {
		return Space{}, err
	}
	if !ok {
		return Space{}, errors.NotFoundf("space %q", name)
	}
	return d.Space, nil
}

// Space returns a space.
func (st *State) Space(ctx context.Context, model, name string) (Space, error) {
	var s Space
	err := st.view(ctx, func(r reader) error {
		var err error
		s, err = getSpace(r, model, name)
		return err
	})
	return s, err
}

// AddSubnet adds a subnet to a model. Its space, if named, must exist;
// the allocatable range, if given, must lie inside the CIDR.
func (st *State) AddSubnet(ctx context.Context, model string, s Subnet) (Subnet, error) {
	p, _, err := environ.ParseRange(s.CIDR, s.AllocatableIPLow, s.AllocatableIPHigh)
	if err != nil {
		return Subnet{}, errors.NewNotValid(nil, err.Error())
	}
	if s.Gateway != "" {
		g, err := netip.ParseAddr(s.Gateway)
		if err != nil || !p.Contains(g) {
			return Subnet{}, errors.NotValidf("gateway %q of subnet %q", s.Gateway, s.CIDR)
		}
	}
	s.Model = model
	s.Life = Alive
	s.Zones = slices.Clone(s.Zones)
	err = st.update(ctx, func(tx *txn) error {
		if _, err := getModelHead(tx, model); err != nil {
			return err
		}
		if s.SpaceName != "" {
			if _, err := getSpace(tx, model, s.SpaceName); err != nil {
				return err
			}
		}
		if ok, err := exists(tx, KindSubnet, model, s.CIDR); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("subnet %q", s.CIDR)
		}
		// Addresses are keyed by value within a model, so subnets may
		// not overlap; provider ids name one subnet each.
		others, err := list[subnetDoc](tx, KindSubnet, model)
		if err != nil {
			return err
		}
		for _, o := range others {
			if op, err := netip.ParsePrefix(o.CIDR); err == nil && op.Overlaps(p) {
				return errors.NewNotValid(nil, fmt.Sprintf("subnet %q overlaps subnet %q", s.CIDR, o.CIDR))
			}
			if s.ProviderID != "" && o.ProviderID == s.ProviderID {
				return errors.NewAlreadyExists(nil, fmt.Sprintf("subnet with provider id %q already exists (%s)", s.ProviderID, o.CIDR))
			}
		}
		return tx.put(KindSubnet, model, s.CIDR, &subnetDoc{Subnet: s}, watcher.FieldCreated)
	})
	return s, err
}

// Subnets returns the subnets of a model, in CIDR key order.
func (st *State) Subnets(ctx context.Context, model string) ([]Subnet, error) {
	var out []Subnet
	err := st.view(ctx, func(r reader) error {
		docs, err := list[subnetDoc](r, KindSubnet, model)
		for _, d := range docs {
			out = append(out, d.Subnet)
		}
		return err
	})
	return out, err
}

func getSubnet(r reader, model, cidr string) (Subnet, error) {
	var d subnetDoc
	ok, err := get(r, KindSubnet, model, cidr, &d)
	if err != nil {
		return Subnet{}, err
	}
	if !ok {
		return Subnet{}, errors.NotFoundf("subnet %q", cidr)
	}
	return d.Subnet, nil
}

// AllocateAddress picks a free address of the subnet's allocatable range,
// starting at offset start (callers pass a random one) and skipping the
// gateway, and records it as allocated to machine with mac, in one
// transaction: two calls never get the same address. A range with no
// free address gives an error saying it is exhausted.
func (st *State) AllocateAddress(ctx context.Context, model, cidr, machine, iface, mac string, start uint64) (IPAddress, error) {
	var got IPAddress
	err := st.update(ctx, func(tx *txn) error {
		got = IPAddress{}
		s, err := getSubnet(tx, model, cidr)
		if err != nil {
			return err
		}
		if _, err := getMachine(tx, model, machine); err != nil {
			return err
		}
		_, r, err := environ.ParseRange(s.CIDR, s.AllocatableIPLow, s.AllocatableIPHigh)
		if err != nil || !r.Valid() {
			return errors.NotSupportedf("address allocation on subnet %q", cidr)
		}
		gw := s.Environ().GatewayAddress()
		var readErr error
		r.Each(start, func(a netip.Addr) bool {
			v := a.String()
			if v == gw {
				return true
			}
			used, err := exists(tx, KindIPAddress, model, v)
			if err != nil {
				readErr = err
				return false
			}
			if used {
				return true
			}
			got = IPAddress{Model: model, Value: v, SubnetCIDR: cidr, State: AddressStateAllocated,
				MachineID: machine, InterfaceName: iface, MACAddress: mac, Life: Alive}
			return false
		})
		if readErr != nil {
			return readErr
		}
		if got.Value == "" {
			return fmt.Errorf("allocatable IP addresses exhausted for subnet %q", cidr)
		}
		return tx.put(KindIPAddress, model, got.Value, &ipAddressDoc{IPAddress: got}, watcher.FieldCreated)
	})
	return got, err
}

// SetAddressUnavailable takes an address out of use (the provider refused
// it): it is no longer any machine's and is never picked again.
func (st *State) SetAddressUnavailable(ctx context.Context, model, value string) error {
	return st.update(ctx, func(tx *txn) error {
		var d ipAddressDoc
		ok, err := get(tx, KindIPAddress, model, value, &d)
		if err != nil {
			return err
		}
		if !ok {
			return errors.NotFoundf("IP address %q", value)
		}
		d.State = AddressStateUnavailable
		d.MachineID = ""
		return tx.put(KindIPAddress, model, value, &d, "state")
	})
}

// MachineAddresses returns the addresses allocated to a machine.
func (st *State) MachineAddresses(ctx context.Context, model, machine string) ([]IPAddress, error) {
	var out []IPAddress
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = machineAddresses(r, model, machine)
		return err
	})
	return out, err
}

func machineAddresses(r reader, model, machine string) ([]IPAddress, error) {
	docs, err := list[ipAddressDoc](r, KindIPAddress, model)
	if err != nil {
		return nil, err
	}
	var out []IPAddress
	for _, d := range docs {
		if d.MachineID == machine && d.State == AddressStateAllocated {
			out = append(out, d.IPAddress)
		}
	}
	return out, nil
}

// IPAddresses returns every address record of a model.
func (st *State) IPAddresses(ctx context.Context, model string) ([]IPAddress, error) {
	var out []IPAddress
	err := st.view(ctx, func(r reader) error {
		docs, err := list[ipAddressDoc](r, KindIPAddress, model)
		for _, d := range docs {
			out = append(out, d.IPAddress)
		}
		return err
	})
	return out, err
}

// ReleaseMachineAddresses frees the addresses allocated to a machine and
// returns them.
func (st *State) ReleaseMachineAddresses(ctx context.Context, model, machine string) ([]IPAddress, error) {
	var out []IPAddress
	err := st.update(ctx, func(tx *txn) error {
		var err error
		out, err = machineAddresses(tx, model, machine)
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return errNoChange
		}
		for _, a := range out {
			if err := tx.remove(KindIPAddress, model, a.Value); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// Spaces returns the spaces of a model, sorted by name.
func (st *State) Spaces(ctx context.Context, model string) ([]Space, error) {
	var out []Space
	err := st.view(ctx, func(r reader) error {
		if _, err := getModelHead(r, model); err != nil {
			return err
		}
		docs, err := list[spaceDoc](r, KindSpace, model)
		for _, d := range docs {
			out = append(out, d.Space)
		}
		return err
	})
	return out, err
}
