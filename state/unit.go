package state

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// Unit is a unit of an application, placed on a machine.
type Unit struct {
	Model       string `json:"model"`
	Name        string `json:"name"` // "mysql/0"
	Application string `json:"application"`
	Life        Life   `json:"life"`
	// MachineID is the machine the unit is assigned to ("" until then).
	MachineID string `json:"machine-id,omitempty"`
	// Principal is set for subordinate units: the unit they run beside.
	Principal string `json:"principal,omitempty"`

	// CAAS (Kubernetes) units (caas_units.go).
	CAASUnit
}

type unitDoc struct {
	Unit
}

// IsPrincipal reports whether u is a principal unit.
func (u Unit) IsPrincipal() bool { return u.Principal == "" }

// AddUnit adds a unit of an alive application (named "<app>/<n>"),
// assigned to machine (if not "") or beside principal (subordinates: on
// the principal's machine).
func (st *State) AddUnit(ctx context.Context, model, app, machine, principal string) (Unit, error) {
	var u Unit
	err := st.update(ctx, func(tx *txn) error {
		var err error
		u, err = tx.addUnit(model, app, machine, principal)
		return err
	})
	return u, err
}

// AddUnitsParams describe the units of AddUnits.
type AddUnitsParams struct {
	// Count is the number of units (at least 1, and at least len(To)).
	Count int
	// To are the (alive) machines of the first len(To) units, in order.
	To []string
	// NewMachine makes the machine of each unit beyond To.
	NewMachine MachineParams
}

// AddUnits adds Count units of an alive principal application in one
// transaction: the first on the machines of To, each of the others on a new
// machine made with NewMachine. Either every unit and machine is added or
// none is; the units' numbers and the machines' ids are read and written in
// that transaction, so units added through any daemons never share a name.
// It returns the names of the units and the ids of the machines made.
func (st *State) AddUnits(ctx context.Context, model, app string, p AddUnitsParams) (units, machines []string, err error) {
	if p.Count < 1 || p.Count < len(p.To) {
		return nil, nil, errors.NotValidf("%d units on %d machines", p.Count, len(p.To))
	}
	np, err := newMachineParams(p.NewMachine)
	if err != nil {
		return nil, nil, err
	}
	err = st.update(ctx, func(tx *txn) error {
		units, machines = nil, nil
		for i := range p.Count {
			machine := ""
			if i < len(p.To) {
				machine = p.To[i]
			} else {
				d, err := tx.newMachine(model, np)
				if err != nil {
					return err
				}
				machine = d.ID
				machines = append(machines, d.ID)
			}
			u, err := tx.addUnit(model, app, machine, "")
			if err != nil {
				return err
			}
			units = append(units, u.Name)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return units, machines, nil
}

// addUnit adds a unit (AddUnit) in the transaction: its number is the next
// of the application's sequence, read and written here.
func (tx *txn) addUnit(model, app, machine, principal string) (Unit, error) {
	a, err := getApplication(tx, model, app)
	if err != nil {
		return Unit{}, err
	}
	if a.Life != Alive {
		return Unit{}, errors.NotValidf("adding a unit to %s application %q", a.Life, app)
	}
	if a.Subordinate != (principal != "") {
		return Unit{}, errors.NotValidf("subordinate unit without principal, or principal for a principal unit")
	}
	if principal != "" {
		var p unitDoc
		ok, err := get(tx, KindUnit, model, principal, &p)
		if err != nil {
			return Unit{}, err
		}
		if !ok {
			return Unit{}, errors.NotFoundf("unit %q", principal)
		}
		machine = p.MachineID
	}
	if machine != "" {
		m, err := getMachine(tx, model, machine)
		if err != nil {
			return Unit{}, err
		}
		if m.Life != Alive {
			return Unit{}, errors.NotValidf("assigning a unit to %s machine %s", m.Life, machine)
		}
	}
	seq, err := tx.nextSequence(model, "unit/"+app)
	if err != nil {
		return Unit{}, err
	}
	u := Unit{Model: model, Name: fmt.Sprintf("%s/%d", app, seq), Application: app, Life: Alive,
		MachineID: machine, Principal: principal}
	return u, tx.put(KindUnit, model, u.Name, &unitDoc{Unit: u}, watcher.FieldCreated, FieldAssignment)
}

// Units returns every unit of a model, sorted by name.
func (st *State) Units(ctx context.Context, model string) ([]Unit, error) {
	var out []Unit
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = allUnits(r, model)
		return err
	})
	return out, err
}

func allUnits(r reader, model string) ([]Unit, error) {
	docs, err := list[unitDoc](r, KindUnit, model)
	if err != nil {
		return nil, err
	}
	out := make([]Unit, len(docs))
	for i := range docs {
		out[i] = docs[i].Unit
	}
	slices.SortFunc(out, func(a, b Unit) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// UnitsOnMachine returns the units assigned to machine id (principals and
// subordinates), sorted by name.
func (st *State) UnitsOnMachine(ctx context.Context, model, id string) ([]Unit, error) {
	var out []Unit
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = unitsOnMachine(r, model, id)
		return err
	})
	return out, err
}

// unitsOnMachine reads the units of machine id through the index of units
// by machine (index.go), not a scan of the model's units.
func unitsOnMachine(r reader, model, id string) ([]Unit, error) {
	names, err := unitMachineIndex.lookup(r, model, id)
	if err != nil {
		return nil, err
	}
	out := make([]Unit, 0, len(names))
	for _, name := range names {
		var d unitDoc
		ok, err := get(r, KindUnit, model, name, &d)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errors.Errorf("unit %q of machine %s is in the index, not in the store", name, id)
		}
		out = append(out, d.Unit)
	}
	return out, nil
}

// SetUnitDying moves an alive unit to dying.
func (st *State) SetUnitDying(ctx context.Context, model, name string) error {
	return st.setUnitLife(ctx, model, name, Dying)
}

func (st *State) setUnitLife(ctx context.Context, model, name string, l Life) error {
	return st.update(ctx, func(tx *txn) error {
		d, err := getUnit(tx, model, name)
		if err != nil {
			return err
		}
		if lifeOrder(d.Life) >= lifeOrder(l) {
			return errNoChange
		}
		d.Life = l
		return tx.put(KindUnit, model, name, &d, lifeFields(l)...)
	})
}

func lifeOrder(l Life) int {
	switch l {
	case Alive:
		return 0
	case Dying:
		return 1
	}
	return 2
}
