package state

import (
	"encoding/json"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// RemoveApplication removes an application that is no longer alive, with
// its units, as the cleanup Juju schedules once an application is dying
// and its agents are done: provisiond models no unit agent, so the units
// go at once (a unit's storage is detached, filesystems marked so, and
// kept, as when the unit provisioner reports its pod gone). The application's config, pod spec,
// cloud service and operator status go with it; its charm stays. An alive
// application refuses (`application "x" is alive`). The transaction that
// removes a dying model's last entity removes the model too.
func (st *State) RemoveApplication(model, app string) error {
	return st.update(func(tx *txn) error { return tx.removeApplication(model, app) })
}

func (tx *txn) removeApplication(model, app string) error {
	a, err := getApplication(tx, model, app)
	if err != nil {
		return err
	}
	if a.Life == Alive {
		return errors.Errorf("application %q is alive", app)
	}
	units, err := appUnits(tx, model, app)
	if err != nil {
		return err
	}
	for _, u := range units {
		// As when the unit provisioner reports a pod gone: the
		// unit's filesystems are detached.
		sis, err := unitStorage(tx, model, u.Name)
		if err != nil {
			return err
		}
		for _, si := range sis {
			fs, err := instanceFilesystem(tx, model, si.ID)
			if errors.Is(err, errors.NotFound) {
				continue
			}
			if err != nil {
				return err
			}
			fs.Status = Status{Status: "detached", Since: tx.now}
			if err := tx.put(KindFilesystem, model, fs.ID, &fs, FieldStatus); err != nil {
				return err
			}
		}
		if err := tx.detachUnitStorage(model, u.Name); err != nil {
			return err
		}
		if err := tx.remove(KindUnit, model, u.Name); err != nil {
			return err
		}
	}
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
