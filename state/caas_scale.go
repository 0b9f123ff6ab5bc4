package state

import (
	"context"
	"github.com/juju/errors"
)

// SetApplicationScale is the operator's scale (Juju's scale-application):
// SetScale with force, which protects the desired scale until the cluster
// reports it.
func (st *State) SetApplicationScale(ctx context.Context, model, app string, scale int) error {
	return st.SetScale(ctx, model, app, scale, 0, true)
}

// SetScale sets an application's desired scale (specs/caasunitprovisioner.md
// §4.6). Without force it is the cluster's report: refused (Forbidden)
// while an operator's scale is not applied yet or when generation is older
// than the stored one; it raises the stored generation and clears the
// protection. With force it sets the protection.
func (st *State) SetScale(ctx context.Context, model, app string, scale int, generation int64, force bool) error {
	if scale < 0 {
		return errors.NotValidf("application scale %d", scale)
	}
	return st.update(ctx, func(tx *txn) error { return tx.scaleApplication(model, app, scale, generation, force) })
}

// scaleApplication is SetScale inside a transaction.
func (tx *txn) scaleApplication(model, app string, scale int, generation int64, force bool) error {
	a, err := getApplication(tx, model, app)
	if err != nil {
		return err
	}
	if err := tx.checkScale(a, scale, generation, force); err != nil {
		return err
	}
	return tx.setScale(a, scale, generation, force)
}

func (tx *txn) checkScale(a applicationDoc, scale int, generation int64, force bool) error {
	if scale < 0 {
		return errors.NotValidf("application scale %d", scale)
	}
	var cs cloudServiceDoc
	ok, err := get(tx, KindCloudService, a.Model, a.Name, &cs)
	if err != nil {
		return err
	}
	if ok && !force {
		if cs.DesiredScaleProtected && scale != a.Scale {
			return errors.Forbiddenf("SetScale(%d) without force while desired scale %d is not applied yet", scale, a.Scale)
		}
		if generation < cs.Generation {
			return errors.Forbiddenf("application generation %d can not be reverted to %d", cs.Generation, generation)
		}
	}
	if a.Life != Alive {
		return errors.Errorf("cannot set scale for application %q to %d: application %q is not alive", a.Name, scale, a.Name)
	}
	return nil
}

func (tx *txn) setScale(a applicationDoc, scale int, generation int64, force bool) error {
	var cs cloudServiceDoc
	stored, err := get(tx, KindCloudService, a.Model, a.Name, &cs)
	if err != nil {
		return err
	}
	before := cs.CloudService
	if force {
		cs.DesiredScaleProtected = true
	} else {
		cs.Generation = max(cs.Generation, generation)
		cs.DesiredScaleProtected = false
	}
	if cs.Generation != before.Generation || cs.DesiredScaleProtected != before.DesiredScaleProtected || !stored {
		if err := tx.put(KindCloudService, a.Model, a.Name, &cs, "scale"); err != nil {
			return err
		}
	}
	if a.Scale == scale {
		return nil
	}
	a.Scale = scale
	return tx.put(KindApplication, a.Model, a.Name, &a, FieldScale)
}
