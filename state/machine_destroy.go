package state

import (
	"fmt"
	"slices"
	"strings"

	"github.com/juju/errors"
	"github.com/juju/names/v5"
)

// DestroyMachines starts the removal of machines (or containers), as an
// operator's remove-machine: each becomes dying and its agents and the
// provisioner take it from there. It is all or nothing, in one transaction:
// when one machine refuses, none changes.
//
// Without force, a machine with units assigned refuses (ErrHasAssignedUnits)
// and so does one hosting containers, whatever their life
// (ErrHasContainers). With force, the machine's containers, at any depth,
// become dying with it, and the units assigned to it and to them are
// removed (their subordinates with them, their storage detached and kept),
// as Juju's force-destroy cleanup does for units whose agent never ran:
// provisiond runs no unit agents, so a dying unit would keep its machine
// from ever being dead. A machine that is already dying or dead is left as
// it is (with force, what it hosts still becomes dying and its units
// still go). A controller machine refuses even with force.
//
// It returns the ids of the machines it moved to dying, in id order.
func (st *State) DestroyMachines(model string, ids []string, force bool) ([]string, error) {
	for _, id := range ids {
		if !names.IsValidMachine(id) {
			return nil, errors.NotValidf("machine id %q", id)
		}
	}
	var changed []string
	err := st.update(func(tx *txn) error {
		changed = nil
		wrote := false
		if _, err := getModelHead(tx, model); err != nil {
			return err
		}
		dying := map[string]bool{}
		var removed removal
		for _, id := range ids {
			d, err := getMachine(tx, model, id)
			if err != nil {
				return err
			}
			if IsController(d.Machine) {
				return errors.Errorf("machine %s is required by the model", id)
			}
			hosted, err := listPrefix[machineDoc](tx, KindMachine, model, id+"/")
			if err != nil {
				return err
			}
			units, err := unitsOnMachine(tx, model, id)
			if err != nil {
				return err
			}
			if !force {
				if d.Life != Alive {
					continue
				}
				if len(units) > 0 {
					return &kindError{fmt.Sprintf("machine %s has unit %q assigned", id, units[0].Name), ErrHasAssignedUnits}
				}
				var cs []string
				for _, c := range hosted {
					if ParentID(c.ID) == id {
						cs = append(cs, c.ID)
					}
				}
				if len(cs) > 0 {
					SortMachineIDs(cs)
					return &kindError{fmt.Sprintf("machine %s is hosting containers %q", id, strings.Join(cs, ",")), ErrHasContainers}
				}
				dying[id] = true
				continue
			}
			dying[id] = d.Life == Alive
			for _, c := range hosted {
				if IsController(c.Machine) {
					return errors.Errorf("machine %s is required by the model", c.ID)
				}
				dying[c.ID] = dying[c.ID] || c.Life == Alive
				more, err := unitsOnMachine(tx, model, c.ID)
				if err != nil {
					return err
				}
				units = append(units, more...)
			}
			for _, u := range units {
				if slices.Contains(removed.units, u.Name) {
					continue // a subordinate of one removed before
				}
				if err := tx.removeUnit(model, u.Name, false, &removed); err != nil {
					return err
				}
				wrote = true
			}
		}
		for id, ok := range dying {
			if !ok {
				continue
			}
			d, err := getMachine(tx, model, id)
			if err != nil {
				return err
			}
			if d.Life != Alive {
				// Made dying by the removal of its last unit above.
				if slices.Contains(removed.machines, id) {
					changed = append(changed, id)
				}
				continue
			}
			d.Life = Dying
			if err := tx.put(KindMachine, model, id, &d, lifeFields(Dying)...); err != nil {
				return err
			}
			changed = append(changed, id)
		}
		if len(changed) == 0 && !wrote {
			return errNoChange
		}
		SortMachineIDs(changed)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return slices.Clip(changed), nil
}
