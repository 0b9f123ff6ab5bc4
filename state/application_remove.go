package state

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// Application and unit removal, as Juju's destroy operations
// (state/application.go DestroyApplicationOperation.destroyOps,
// state/unit.go DestroyUnitOperation.destroyOps, and the cleanups of
// state/cleanup.go they schedule), with one difference: provisiond models
// no unit agent. Juju removes a unit at once when its destroy finds that
// its agent never started (an IAAS unit not yet deployed, a Kubernetes
// unit whose agent has recorded no state); otherwise the unit becomes
// dying and its agent finishes it. provisiond's units never have a
// running agent, so a destroyed unit is always removed at once, in the
// destroy's transaction.
//
// So the destroy of an application decides everything in one
// transaction: the application becomes dying (nothing adds units to it
// from then on), each of its units is removed (removeUnit), and the
// removal of its last unit finishes it (finishApplication): a Kubernetes
// application, whose cluster resources may still exist, becomes dead and
// waits for its unit provisioner to delete them (ClearApplicationsResources
// then removes it); an IAAS application is removed at once. One with no
// units is finished at once, as Juju's destroyOps does for an application
// whose unit count is zero.

// ApplicationDestroyed is what DestroyApplication did.
type ApplicationDestroyed struct {
	// Life is the application's life after the call: dead when a
	// Kubernetes application waits for its cluster resources to be
	// deleted, dead too when it was removed.
	Life Life
	// Removed is true when the application is gone.
	Removed bool
	// Units are the units removed, subordinates included, in order.
	Units []string
	// DyingMachines are the machines left without a principal unit, which
	// became dying (Juju's destroyHostOps).
	DyingMachines []string
	// Storage is the storage destroyed with the units (destroyStorage).
	Storage []DisposedStorage
}

// removal collects what one removal transaction did, for its caller's
// answer. The transaction's function may run again (a store retry): it
// starts from a zero removal each time.
type removal struct {
	units    []string
	machines []string
	storage  []DisposedStorage
}

// DestroyApplication destroys an application as Juju's remove-application
// does, in one transaction: it becomes dying, its units are removed (their
// subordinates with them; a machine left without a principal unit, hosting
// no container, becomes dying), their storage detached and kept, or
// destroyed when destroyStorage is set; then a Kubernetes application
// becomes dead (its unit provisioner deletes its cluster resources and
// calls ClearApplicationsResources, which removes it) and an IAAS one is
// removed. A dying application (left so by an interrupted call, or by an
// older version) carries on the same way; a dead one is left as it is.
//
// An application with so many units that the transaction exceeds the
// store's limits (etcd's --max-txn-ops) is destroyed in steps instead: one
// transaction makes it dying, then its units go in batches, and the batch
// that removes the last one finishes it.
func (st *State) DestroyApplication(ctx context.Context, model, app string, destroyStorage bool) (ApplicationDestroyed, error) {
	var out removal
	var res ApplicationDestroyed
	err := st.update(ctx, func(tx *txn) error {
		out = removal{}
		var err error
		res, err = tx.destroyApplication(model, app, destroyStorage, &out)
		return err
	})
	if errors.Is(err, store.ErrTooLarge) {
		return st.destroyApplicationInSteps(ctx, model, app, destroyStorage)
	}
	if err != nil {
		return ApplicationDestroyed{}, err
	}
	res.Units, res.DyingMachines, res.Storage = out.units, out.machines, out.storage
	return res, nil
}

// destroyApplicationInSteps is DestroyApplication for an application too
// large for one transaction: dying first, then the units in batches (bulk:
// each unit a part of a transaction, transactions halved until they fit).
func (st *State) destroyApplicationInSteps(ctx context.Context, model, app string, destroyStorage bool) (ApplicationDestroyed, error) {
	if err := st.update(ctx, func(tx *txn) error {
		a, err := getApplication(tx, model, app)
		if err != nil {
			return err
		}
		if a.Life != Alive {
			return errNoChange
		}
		a.Life = Dying
		return tx.put(KindApplication, model, app, &a, lifeFields(Dying)...)
	}); err != nil {
		return ApplicationDestroyed{}, err
	}
	var units []Unit
	if err := st.view(ctx, func(r reader) error {
		var err error
		units, err = appUnits(r, model, app)
		return err
	}); err != nil {
		return ApplicationDestroyed{}, err
	}
	outs := make([]removal, len(units))
	errs := st.bulk(ctx, len(units), func(tx *txn, i int) error {
		outs[i] = removal{}
		err := tx.removeUnit(model, units[i].Name, destroyStorage, &outs[i])
		if errors.Is(err, errors.NotFound) {
			return errNoChange
		}
		return err
	})
	var res ApplicationDestroyed
	for i, err := range errs {
		if err != nil {
			return ApplicationDestroyed{}, errors.Annotatef(err, "removing unit %q of application %q", units[i].Name, app)
		}
		res.Units = append(res.Units, outs[i].units...)
		res.DyingMachines = append(res.DyingMachines, outs[i].machines...)
		res.Storage = append(res.Storage, outs[i].storage...)
	}
	// With no units (or with units that went meanwhile) it is finished
	// here; again, it is a no-op.
	if err := st.update(ctx, func(tx *txn) error { return tx.finishApplication(model, app) }); err != nil {
		return ApplicationDestroyed{}, err
	}
	a, err := st.Application(ctx, model, app)
	switch {
	case errors.Is(err, errors.NotFound):
		res.Life, res.Removed = Dead, true
	case err != nil:
		return ApplicationDestroyed{}, err
	default:
		res.Life = a.Life
	}
	return res, nil
}

// destroyApplication is DestroyApplication in tx. A dead application
// waiting for its cluster resources is errNoChange.
func (tx *txn) destroyApplication(model, app string, destroyStorage bool, out *removal) (ApplicationDestroyed, error) {
	a, err := getApplication(tx, model, app)
	if err != nil {
		return ApplicationDestroyed{}, err
	}
	if a.Life == Dead && a.HasResources {
		return ApplicationDestroyed{Life: Dead}, errNoChange
	}
	if a.Life == Alive {
		a.Life = Dying
		if err := tx.put(KindApplication, model, app, &a, lifeFields(Dying)...); err != nil {
			return ApplicationDestroyed{}, err
		}
	}
	units, err := appUnits(tx, model, app)
	if err != nil {
		return ApplicationDestroyed{}, err
	}
	for _, u := range units {
		// The last unit's removal finishes the application.
		if err := tx.removeUnit(model, u.Name, destroyStorage, out); err != nil && !errors.Is(err, errors.NotFound) {
			return ApplicationDestroyed{}, err
		}
	}
	if len(units) == 0 {
		if err := tx.finishApplication(model, app); err != nil {
			return ApplicationDestroyed{}, err
		}
	}
	switch a, err := getApplication(tx, model, app); {
	case errors.Is(err, errors.NotFound):
		return ApplicationDestroyed{Life: Dead, Removed: true}, nil
	case err != nil:
		return ApplicationDestroyed{}, err
	default:
		return ApplicationDestroyed{Life: a.Life}, nil
	}
}

// finishApplication ends a dying or dead application that has no unit
// left: one whose cluster resources may still exist (a Kubernetes
// application until ClearApplicationsResources) becomes dead; any other is
// removed (removeApplication). An alive application, or one with units, is
// left as it is, and so is a missing one.
func (tx *txn) finishApplication(model, app string) error {
	a, err := getApplication(tx, model, app)
	if errors.Is(err, errors.NotFound) {
		return nil
	}
	if err != nil || a.Life == Alive {
		return err
	}
	units, err := appUnits(tx, model, app)
	if err != nil || len(units) > 0 {
		return err
	}
	if a.HasResources {
		if a.Life == Dead {
			return nil
		}
		a.Life = Dead
		return tx.put(KindApplication, model, app, &a, lifeFields(Dead)...)
	}
	return tx.removeApplication(model, app)
}

// removeApplication removes an application's record with the records
// that belong to it: its config, pod spec, cloud service and operator
// status (its charm stays). Its units must be gone.
func (tx *txn) removeApplication(model, app string) error {
	for _, rec := range []struct {
		kind watcher.Kind
		id   string
	}{
		{KindApplicationConfig, app}, {KindPodSpec, app}, {KindCloudService, app}, {KindStatus, OperatorStatusKey(app)},
	} {
		var raw json.RawMessage
		ok, err := get(tx, rec.kind, model, rec.id, &raw)
		if err != nil {
			return err
		}
		if ok {
			if err := tx.remove(rec.kind, model, rec.id); err != nil {
				return err
			}
		}
	}
	return tx.remove(KindApplication, model, app)
}

// ClearAndRemoveApplications is the controller side of the unit
// provisioner's ClearApplicationsResources: for each application, its
// cluster resources are gone, so it is removed. As Juju's ClearResources
// (state/application.go), an alive application refuses (`application "x"
// is alive`); Juju then schedules the application's cleanup, which removes
// a dead application at once. A dying one still holding units (left so by
// an older version) has them removed first, their storage detached. Each
// application is cleared and removed in one part of one transaction
// (bulk): never left cleared but not removed; each keeps its error.
func (st *State) ClearAndRemoveApplications(ctx context.Context, model string, apps []string) []error {
	return st.bulk(ctx, len(apps), func(tx *txn, i int) error {
		if err := tx.clearApplicationResources(model, apps[i]); err != nil && !errors.Is(err, errNoChange) {
			return err
		}
		_, err := tx.destroyApplication(model, apps[i], false, &removal{})
		return err
	})
}

// ClearApplicationResources clears the has-resources flag of an
// application that is no longer alive (`application "x" is alive`
// otherwise), without removing it.
func (st *State) ClearApplicationResources(ctx context.Context, model, app string) error {
	return st.update(ctx, func(tx *txn) error { return tx.clearApplicationResources(model, app) })
}

func (tx *txn) clearApplicationResources(model, app string) error {
	a, err := getApplication(tx, model, app)
	if err != nil {
		return err
	}
	if a.Life == Alive {
		return errors.Errorf("application %q is alive", app)
	}
	if !a.HasResources {
		return errNoChange
	}
	a.HasResources = false
	return tx.put(KindApplication, model, app, &a, FieldHasResources)
}

// RemoveUnits removes units (principals and subordinates), all in one
// transaction: all or none (an unknown unit refuses them all). Each is
// destroyed as Juju destroys a unit whose agent never ran (provisiond
// models none): removed at once with its subordinates, its storage
// detached and kept; a machine left without a principal unit and hosting
// no container becomes dying, as Juju's destroyHostOps does; the removal
// of the last unit of a dying application finishes it.
func (st *State) RemoveUnits(ctx context.Context, model string, names []string) (UnitsRemoved, error) {
	var out removal
	err := st.update(ctx, func(tx *txn) error {
		out = removal{}
		for _, name := range names {
			if err := tx.removeUnit(model, name, false, &out); err != nil {
				if errors.Is(err, errors.NotFound) && slices.Contains(out.units, name) {
					continue // a subordinate of one removed before
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return UnitsRemoved{}, err
	}
	return UnitsRemoved{Units: out.units, DyingMachines: out.machines}, nil
}

// UnitsRemoved is what RemoveUnits did.
type UnitsRemoved struct {
	// Units are the units removed, the subordinates of those named with
	// them.
	Units []string
	// DyingMachines are the machines left without a principal unit, which
	// became dying.
	DyingMachines []string
}

// RemoveUnit is RemoveUnits of one unit.
func (st *State) RemoveUnit(ctx context.Context, model, name string) error {
	_, err := st.RemoveUnits(ctx, model, []string{name})
	return err
}

// removeUnit removes a unit in tx as its destroy does when its agent never
// ran (see the top of this file): its subordinates first, then its storage
// (detached and kept, or destroyed with destroyStorage), the unit itself,
// then its host machine if no principal unit is left on it (dying), and
// its application if it was dying and this was its last unit.
func (tx *txn) removeUnit(model, name string, destroyStorage bool, out *removal) error {
	d, err := getUnit(tx, model, name)
	if err != nil {
		return err
	}
	if d.IsPrincipal() && d.MachineID != "" {
		onMachine, err := unitsOnMachine(tx, model, d.MachineID)
		if err != nil {
			return err
		}
		for _, sub := range onMachine {
			if sub.Principal == name {
				if err := tx.removeUnit(model, sub.Name, destroyStorage, out); err != nil {
					return err
				}
			}
		}
	}
	sis, err := unitStorage(tx, model, name)
	if err != nil {
		return err
	}
	for _, si := range sis {
		if destroyStorage {
			err = tx.disposeStorageInstance(model, si, false, out)
		} else {
			err = tx.detachStorageInstance(model, si, true)
		}
		if err != nil {
			return err
		}
	}
	if err := tx.remove(KindUnit, model, name); err != nil {
		return err
	}
	out.units = append(out.units, name)
	if d.IsPrincipal() && d.MachineID != "" {
		if err := tx.destroyHostMachine(model, d.MachineID, out); err != nil {
			return err
		}
	}
	return tx.finishApplication(model, d.Application)
}

// destroyHostMachine makes a unit's former machine dying when no principal
// unit is left on it, as Juju's destroyHostOps: not a controller machine,
// not one hosting containers, and only an alive one.
func (tx *txn) destroyHostMachine(model, id string, out *removal) error {
	m, err := getMachine(tx, model, id)
	if errors.Is(err, errors.NotFound) {
		return nil
	}
	if err != nil || m.Life != Alive || IsController(m.Machine) {
		return err
	}
	units, err := unitsOnMachine(tx, model, id)
	if err != nil {
		return err
	}
	for _, u := range units {
		if u.IsPrincipal() {
			return nil
		}
	}
	cs, err := containers(tx, model, id)
	if err != nil || len(cs) > 0 {
		return err
	}
	m.Life = Dying
	if err := tx.put(KindMachine, model, id, &m, lifeFields(Dying)...); err != nil {
		return err
	}
	out.machines = append(out.machines, id)
	return nil
}
