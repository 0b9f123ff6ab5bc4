package state

import (
	"context"
	"strconv"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
)

// SchemaVersion is the version of state's records and derived indexes this
// build writes, kept in the store under schemaKey. It is state's, not the
// engine's (boltstore has its own layout version): a store of an older
// version is migrated once when it opens (migrations, one transaction; a
// version at a time, in steps where it has them, when the engine refuses
// one transaction as too large), a newer one is refused, so an older build never writes a store whose
// indexes it does not keep.
//
//	1  (no schemaKey) what state/db's builds wrote: records carry the
//	   revision they were written at, and the unit provider id index may
//	   be stale (an older build did not keep it; it was rebuilt on every
//	   open)
//	2  the unit provider id index is kept by the writes themselves
//	   ("unit-provider-id/<model>\x00<provider id>\x00<unit>", and each
//	   unit's own "unit-provider-id/<model>\x01<unit>")
//	3  every derived index is kept through the registry (index.go):
//	   units by provider id and by machine, models by name, as
//	   "idx-<index>/..." (the kinds "unit-provider-id" and "model-name" of
//	   versions 1 and 2 are gone)
//	4  every model's config holds Juju's model config defaults for its
//	   type (ModelConfigDefaults): the migration fills in the keys a model
//	   lacks and leaves every value already set as it is
//	5  every commit keeps its history record beside its change set, in
//	   the engine's own format (bbolt: the bucket "meta/history"; etcd: a
//	   version-3 value of the feed key, which an earlier build cannot read
//	   and would take for a broken feed at every commit); state's records
//	   are unchanged, so the migration has nothing to do but stamp the
//	   version, which makes an earlier build refuse the store
const SchemaVersion = 5

// schemaKey holds SchemaVersion, as decimal text.
var schemaKey = store.Key(kindSchema, "state")

// migrations[v-1] upgrades a version v store to version v+1, inside one
// transaction.
var migrations = []func(tx *txn) error{
	// 1 → 2 built the unit provider id index of version 2; 2 → 3
	// replaces it, so a version 1 store has nothing to do here.
	func(*txn) error { return nil },
	// 2 → 3: every index of the registry, built once from the records;
	// the kinds of the older indexes deleted.
	func(tx *txn) error { return buildIndexes(tx, "unit-provider-id", "model-name") },
	// 3 → 4: Juju's model config defaults in every model.
	func(tx *txn) error {
		_, err := fillModelConfigDefaults(tx, 0)
		return err
	},
	// 4 → 5: the history, which the engines keep from this build on.
	func(*txn) error { return nil },
}

// steppedMigrations[v-1], where set, is migrations[v-1] in steps, for a
// store whose engine refuses it as one transaction (store.ErrTooLarge:
// etcd's --max-txn-ops, 128 by default, is one put per model for the 3 →
// 4 migration). A step writes at most migrationStep records and reports
// whether more are left; each step is idempotent, so steps interrupted or
// run by two daemons at once do no harm, and the version is stamped by the
// step that finds nothing left, in the same transaction.
var steppedMigrations = []func(tx *txn, most int) (more bool, err error){
	nil,
	nil,
	fillModelConfigDefaults,
	nil,
}

// migrationStep is the most records a step of a stepped migration writes
// at first: with the feed key and the version, well under etcd's default
// 128 operations per transaction; halved while the engine refuses a step as
// too large.
const migrationStep = 64

// fillModelConfigDefaults adds to the config of every model the defaults of
// its type that it lacks (a value an operator set, of any type, stays),
// writing at most most models (0: no bound) and reporting whether models
// were left to fill.
func fillModelConfigDefaults(tx *txn, most int) (more bool, err error) {
	docs, err := list[modelDoc](tx, KindModel, "")
	if err != nil {
		return false, err
	}
	wrote := 0
	for i := range docs {
		d := &docs[i]
		cfg, added := withConfigDefaults(d.Type, d.Config)
		if !added {
			continue
		}
		if most > 0 && wrote == most {
			return true, nil
		}
		d.Config = cfg
		if err := tx.put(KindModel, d.UUID, d.UUID, d, FieldConfig); err != nil {
			return false, err
		}
		wrote++
	}
	return false, nil
}

// ErrNewerSchema is returned by Open for a store written by a newer
// provisiond.
var ErrNewerSchema = errors.New("the store has a newer state schema version; use a newer provisiond")

// schemaVersion reads the stored version; 0 means none is stored.
func schemaVersion(r reader) (int, error) {
	b, ok, err := r.Get(schemaKey)
	if err != nil || !ok {
		return 0, errors.Trace(err)
	}
	v, err := strconv.Atoi(string(b))
	if err != nil || v < 1 {
		return 0, errors.Errorf("state schema version %q is not valid", b)
	}
	return v, nil
}

// checkSchema reads the stored version and whether the store is
// initialised, refusing a newer version. A store without a version is
// version 1 when initialised (written before there was one) and current
// when not (a new store: Initialize stamps it).
func checkSchema(r reader) (int, error) {
	v, err := schemaVersion(r)
	if err != nil {
		return 0, err
	}
	if v == 0 {
		ok, err := exists(r, KindController, "", ControllerID)
		if err != nil {
			return 0, err
		}
		if !ok {
			return SchemaVersion, nil
		}
		v = 1
	}
	if v > SchemaVersion {
		return 0, errors.Annotatef(ErrNewerSchema, "version %d, this build supports up to %d", v, SchemaVersion)
	}
	return v, nil
}

// migrate brings the store's schema to SchemaVersion, in one transaction;
// when the engine refuses that transaction as too large, one version at a
// time, each in steps where steppedMigrations has them (migrateInSteps).
func (st *State) migrate(ctx context.Context) error {
	var v int
	if err := st.view(ctx, func(r reader) error {
		var err error
		v, err = checkSchema(r)
		return err
	}); err != nil {
		return err
	}
	if v == SchemaVersion {
		return nil
	}
	from := v
	err := st.update(ctx, func(tx *txn) error {
		v, err := checkSchema(tx) // again: another daemon may have migrated it
		if err != nil || v == SchemaVersion {
			return err
		}
		for ; v < SchemaVersion; v++ {
			if err := migrations[v-1](tx); err != nil {
				return errors.Annotatef(err, "migrating the state schema from version %d to %d", v, v+1)
			}
		}
		return tx.stampSchema(SchemaVersion)
	})
	if errors.Is(err, store.ErrTooLarge) {
		st.logger.Info("state schema migration too large for one transaction of the store; migrating in steps", "from", from, "to", SchemaVersion)
		err = st.migrateInSteps(ctx)
	}
	if err != nil {
		return err
	}
	st.logger.Info("state schema migrated", "from", from, "to", SchemaVersion)
	return nil
}

// migrateInSteps runs the pending migrations one version at a time, each
// stamping its version as it completes: a migration with a stepped form in
// as many transactions as it needs, any other in one.
func (st *State) migrateInSteps(ctx context.Context) error {
	most := migrationStep
	for {
		done := false
		err := st.update(ctx, func(tx *txn) error {
			v, err := checkSchema(tx)
			if err != nil {
				return err
			}
			if done = v == SchemaVersion; done {
				return errNoChange
			}
			more := false
			if step := steppedMigrations[v-1]; step != nil {
				more, err = step(tx, most)
			} else {
				err = migrations[v-1](tx)
			}
			if err != nil {
				return errors.Annotatef(err, "migrating the state schema from version %d to %d", v, v+1)
			}
			if more {
				return nil
			}
			return tx.stampSchema(v + 1)
		})
		if errors.Is(err, store.ErrTooLarge) && most > 1 {
			most /= 2 // the engine allows fewer operations per transaction
			continue
		}
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// stampSchema stores version v (Initialize and migrate: SchemaVersion;
// migrateInSteps: each version as it completes).
func (tx *txn) stampSchema(v int) error {
	return errors.Trace(tx.Put(schemaKey, strconv.AppendInt(nil, int64(v), 10)))
}
