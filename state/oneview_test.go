package state_test

import (
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// TestOneView: every read through a OneView State sees the revision the
// view began at, whatever is committed meanwhile; its writes fail.
func TestOneView(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	first := statetest.AddMachine(t, st, model, "")
	var added state.Machine
	err := st.OneView(t.Context(), func(v *state.State) error {
		before, err := v.Machines(t.Context(), model)
		if err != nil {
			return err
		}
		added = statetest.AddMachine(t, st, model, "") // committed while the view is open
		after, err := v.Machines(t.Context(), model)
		if err != nil {
			return err
		}
		if len(before) != 1 || len(after) != 1 || after[0].ID != first.ID {
			t.Errorf("machines in the view: %d then %d, want the one machine both times", len(before), len(after))
		}
		if _, err := v.Machine(t.Context(), model, added.ID); !errors.Is(err, errors.NotFound) {
			t.Errorf("machine %s committed after the view began: %v, want not found", added.ID, err)
		}
		if _, err := v.AddMachine(t.Context(), model, state.MachineParams{}); err == nil {
			t.Error("a write through the view succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Machine(t.Context(), model, added.ID); err != nil {
		t.Errorf("after the view: %v", err)
	}
}
