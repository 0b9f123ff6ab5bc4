package state_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// State.Machine decodes through a cache of decoded records. What it
// returns must still be what the database holds at the read, and each
// caller's own copy.
func TestMachineReadsAreCurrentAndPrivate(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := addMachine(t, st, state.MachineParams{Jobs: []string{state.JobHostUnits}})
	must(t, st.SetMachineStatus(t.Context(), model, m.ID, state.AgentStatus,
		state.Status{Status: "error", Message: "m", Data: map[string]any{"x": map[string]any{"y": "z"}}}))

	// Changing what a read returned changes nothing for the next read.
	got, err := st.Machine(t.Context(), model, m.ID)
	must(t, err)
	got.Jobs[0] = "changed"
	got.Status.Data["x"].(map[string]any)["y"] = "changed"
	got.Status.Data["new"] = true
	again, err := st.Machine(t.Context(), model, m.ID)
	must(t, err)
	if again.Jobs[0] != state.JobHostUnits || again.Status.Data["x"].(map[string]any)["y"] != "z" || len(again.Status.Data) != 1 {
		t.Errorf("a caller's change leaked into the next read: %v %v", again.Jobs, again.Status.Data)
	}

	// Every write is seen by the next read.
	must(t, st.SetMachineStatus(t.Context(), model, m.ID, state.AgentStatus, state.Status{Status: "started"}))
	if got, _ := st.Machine(t.Context(), model, m.ID); got.Status.Status != "started" || len(got.Status.Data) != 0 {
		t.Errorf("after SetMachineStatus: %+v", got.Status)
	}
	must(t, st.SetInstanceInfo(t.Context(), model, m.ID, state.InstanceInfo{InstanceID: "i-1", Nonce: "n"}))
	if got, _ := st.Machine(t.Context(), model, m.ID); got.InstanceID != "i-1" || got.Nonce != "n" {
		t.Errorf("after SetInstanceInfo: %q %q", got.InstanceID, got.Nonce)
	}
	must(t, st.SetMachineDying(t.Context(), model, m.ID))
	if got, _ := st.Machine(t.Context(), model, m.ID); got.Life != state.Dying {
		t.Errorf("after SetMachineDying: life %q", got.Life)
	}
	must(t, st.EnsureMachineDead(t.Context(), model, m.ID))
	_, err = st.RemoveMachine(t.Context(), model, m.ID)
	must(t, err)
	if _, err := st.Machine(t.Context(), model, m.ID); !errors.Is(err, errors.NotFound) {
		t.Errorf("after RemoveMachine: %v, want not found", err)
	}
	if _, err := st.Machine(t.Context(), model, "0/bad"); !errors.Is(err, errors.NotValid) {
		t.Errorf("bad id: %v, want not valid", err)
	}
}

// More machines than the cache has slots, read and written concurrently
// (run with -race): every read sees a status at least as new as the last
// write that returned before it.
func TestMachineReadsUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	const machines = 1100 // over the cache's 1,024 slots: entries are evicted
	ids := make([]string, machines)
	for i := range ids {
		ids[i] = addMachine(t, st, state.MachineParams{}).ID
	}
	var (
		mu      sync.Mutex // held across each write, so seq only goes up per machine
		seq     int
		written = map[string]int{} // id -> seq of the last write that returned
	)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for n := 1; n <= 25; n++ {
				id := ids[(w*97+n*13)%machines]
				mu.Lock()
				seq++
				err := st.SetMachineStatus(t.Context(), model, id, state.AgentStatus,
					state.Status{Status: "error", Message: fmt.Sprint(seq)})
				if err == nil {
					written[id] = seq
				}
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for r := range 4 {
		wg.Go(func() {
			for i := range 3 * machines {
				id := ids[(r*31+i*7)%machines]
				mu.Lock()
				floor := written[id]
				mu.Unlock()
				m, err := st.Machine(t.Context(), model, id)
				if err != nil {
					t.Error(err)
					return
				}
				var n int
				if m.Status.Message != "" {
					fmt.Sscan(m.Status.Message, &n)
				}
				if n < floor {
					t.Errorf("machine %s: read status %d after write %d returned", id, n, floor)
					return
				}
				m.Status.Message = "scribbled" // callers own what they get
			}
		})
	}
	wg.Wait()
}
