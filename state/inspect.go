package state

import (
	"context"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
)

// OpenReadOnly returns the State kept in s, a store opened for inspection
// (boltstore.OpenReadOnly: provisiond check, backup's manifest, the crash
// harness). Nothing is created or migrated, and every write method fails;
// reads, InspectStore and Stats work. A store of a newer state schema is
// refused. As with Open, the State owns s.
func OpenReadOnly(s store.Store) (*State, error) {
	st := newState(s, Options{})
	if err := st.view(context.Background(), func(r reader) error {
		_, err := checkSchema(r)
		return err
	}); err != nil {
		_ = st.Close()
		return nil, errors.Annotate(err, "opening state")
	}
	return st, nil
}

// InspectStore reports the store's figures for operators (provisionctl
// show-controller and version, /metrics): those of its store.Inspector,
// or, for a store that implements none, its Info alone.
func (st *State) InspectStore(ctx context.Context) (store.Inspection, error) {
	if in, ok := st.store.(store.Inspector); ok {
		return in.Inspect(ctx)
	}
	return store.Inspection{Info: st.store.Info()}, nil
}

// Stats is what provisiond check and backup's manifest record of a
// store: its figures, state's schema version and the count of its
// records.
type Stats struct {
	store.Inspection
	// StateSchemaVersion is state's (SchemaVersion; 1 for a store
	// written before state kept one); Inspection.SchemaVersion is the
	// engine's layout's.
	StateSchemaVersion int
	// Records counts the keys of each kind that holds any: one kind per
	// entity kind (see the Kind constants) plus those of the indexes,
	// sequences and schema. Revision is the revision they were counted
	// at.
	Records map[string]int
}

// Stats inspects the store and counts its records, in one read view. It
// reads every key: it is for tools, not for every request.
func (st *State) Stats(ctx context.Context) (Stats, error) {
	in, err := st.InspectStore(ctx)
	if err != nil {
		return Stats{}, errors.Trace(err)
	}
	out := Stats{Inspection: in, Records: map[string]int{}}
	err = st.store.View(ctx, func(r store.Reader) error {
		v, err := checkSchema(r)
		if err != nil {
			return err
		}
		out.StateSchemaVersion, out.Revision = v, r.Revision()
		return scan(r, "", func(key string, _ []byte) error {
			out.Records[store.Kind(key)]++
			return nil
		})
	})
	if err != nil {
		return Stats{}, errors.Trace(err)
	}
	return out, nil
}
