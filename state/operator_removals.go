package state

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/juju/errors"
)

// Removals operators ask for (provisionctl remove-space, remove-subnet,
// remove-agent-binaries). Each checks what still uses the record in the
// same transaction that removes it.

// RemoveSpace removes a space of a model. A space that a subnet is in, or
// that the constraints of a machine, an application or the model name
// (spaces=S or ^S), or an application's endpoint bindings, is refused:
// nothing would be left to satisfy them.
func (st *State) RemoveSpace(ctx context.Context, model, name string) error {
	return st.update(ctx, func(tx *txn) error {
		if _, err := getSpace(tx, model, name); err != nil {
			return err
		}
		subnets, err := list[subnetDoc](tx, KindSubnet, model)
		if err != nil {
			return err
		}
		var in []string
		for _, s := range subnets {
			if s.SpaceName == name {
				in = append(in, s.CIDR)
			}
		}
		if len(in) > 0 {
			return errors.NewNotValid(nil, fmt.Sprintf("space %q holds subnets %s: remove them first", name, strings.Join(in, ", ")))
		}
		names := func(c Constraints) bool {
			return slices.Contains(c.PositiveSpaces(), name) || slices.Contains(c.NegativeSpaces(), name)
		}
		machines, err := list[machineDoc](tx, KindMachine, model)
		if err != nil {
			return err
		}
		for _, m := range machines {
			if names(m.Constraints) {
				return errors.NewNotValid(nil, fmt.Sprintf("space %q is named by the constraints of machine %s", name, m.ID))
			}
		}
		apps, err := list[applicationDoc](tx, KindApplication, model)
		if err != nil {
			return err
		}
		for _, a := range apps {
			if names(a.Constraints) {
				return errors.NewNotValid(nil, fmt.Sprintf("space %q is named by the constraints of application %q", name, a.Name))
			}
			for ep, sp := range a.EndpointBindings {
				if sp == name {
					return errors.NewNotValid(nil, fmt.Sprintf("space %q is bound to endpoint %q of application %q", name, ep, a.Name))
				}
			}
		}
		var mc modelConstraintsDoc
		if _, err := get(tx, KindModelConstraints, model, model, &mc); err != nil {
			return err
		}
		if names(mc.Constraints) {
			return errors.NewNotValid(nil, fmt.Sprintf("space %q is named by the model's constraints", name))
		}
		return tx.remove(KindSpace, model, name)
	})
}

// RemoveSubnet removes a subnet of a model. A subnet with addresses in use
// (allocated to a machine, or marked unavailable) is refused: release them
// first (remove the machines).
func (st *State) RemoveSubnet(ctx context.Context, model, cidr string) error {
	return st.update(ctx, func(tx *txn) error {
		if _, err := getSubnet(tx, model, cidr); err != nil {
			return err
		}
		addrs, err := list[ipAddressDoc](tx, KindIPAddress, model)
		if err != nil {
			return err
		}
		var inUse []string
		for _, a := range addrs {
			if a.SubnetCIDR == cidr {
				inUse = append(inUse, a.Value)
			}
		}
		if len(inUse) > 0 {
			return errors.NewNotValid(nil, fmt.Sprintf("subnet %q has %d address(es) in use (%s): remove the machines holding them first",
				cidr, len(inUse), strings.Join(inUse[:min(len(inUse), 3)], ", ")))
		}
		return tx.remove(KindSubnet, model, cidr)
	})
}

// RemoveAgentBinary removes one entry ("3.3.0-ubuntu-amd64") of the
// controller's agent binaries catalog. Agents already running keep their
// binaries; provisioners no longer find that version.
func (st *State) RemoveAgentBinary(ctx context.Context, version string) error {
	return st.update(ctx, func(tx *txn) error {
		if ok, err := exists(tx, KindTools, "", version); err != nil {
			return err
		} else if !ok {
			return errors.NotFoundf("agent binaries %q", version)
		}
		return tx.remove(KindTools, "", version)
	})
}
