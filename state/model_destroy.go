package state

import "github.com/juju/errors"

// DestroyModel starts removing a model as Juju's destroy-model does. It is
// RemoveModel (an empty model goes at once), and then, for a model left
// dying, its entities start going with it: its IAAS units are removed at
// once (no unit agent is modelled: dying units would keep their machines
// forever), its top-level machines become dying with everything they
// host (DestroyMachines with force), and its applications become dying;
// IAAS applications, left without units, are removed. The agents tear
// down what is dying (the provisioners remove dead machines, the unit
// provisioner clears a dying application's resources) and the model goes
// with its last entity. Storage is not destroyed: a model that still holds
// volumes, filesystems or storage instances stays dying (Juju's
// destroy-model asks for --destroy-storage; provisiond models no storage
// provisioner).
//
// Each step is its own transaction and each is idempotent: DestroyModel
// on a dying model carries on where an interrupted call stopped. removed
// reports whether the model is gone when DestroyModel returns.
func (st *State) DestroyModel(uuid string) (m Model, removed bool, err error) {
	m, removed, err = st.RemoveModel(uuid)
	if err != nil || removed {
		return m, removed, err
	}
	gone := func(err error) bool { return errors.Is(err, errors.NotFound) }
	if m.Type == ModelTypeIAAS {
		units, err := st.Units(uuid)
		if err != nil {
			return m, gone(err), ignore(err, gone)
		}
		for _, u := range units {
			if err := st.RemoveUnit(uuid, u.Name); err != nil && !gone(err) {
				return m, false, err
			}
		}
	}
	ms, err := st.Machines(uuid)
	if err != nil {
		return m, gone(err), ignore(err, gone)
	}
	var top []string
	for _, mc := range ms {
		if !IsController(mc) && ParentID(mc.ID) == "" {
			top = append(top, mc.ID)
		}
	}
	if len(top) > 0 {
		if _, err := st.DestroyMachines(uuid, top, true); err != nil && !gone(err) {
			return m, false, err
		}
	}
	apps, err := st.Applications(uuid)
	if err != nil {
		return m, gone(err), ignore(err, gone)
	}
	for _, a := range apps {
		if err := st.DestroyApplication(uuid, a.Name); err != nil && !gone(err) {
			return m, false, err
		}
		if m.Type == ModelTypeIAAS {
			if err := st.RemoveApplication(uuid, a.Name); err != nil && !gone(err) {
				return m, false, err
			}
		}
	}
	if _, err := st.Model(uuid); gone(err) {
		m.Life = Dead
		return m, true, nil
	} else if err != nil {
		return m, false, err
	}
	return m, false, nil
}

// ignore is nil when is(err), else err.
func ignore(err error, is func(error) bool) error {
	if is(err) {
		return nil
	}
	return err
}
