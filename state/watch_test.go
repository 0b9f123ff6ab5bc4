package state_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

func TestParentIDAndContainerTypeOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ id, parent, ctype string }{
		{"", "", ""},
		{"0", "", ""},
		{"10", "", ""},
		{"0/lxd", "", ""}, // not a machine id; no parent either
		{"0/lxd/0", "0", "lxd"},
		{"10/kvm/3", "10", "kvm"},
		{"0/lxd/0/kvm/12", "0/lxd/0", "kvm"},
		{"1/lxd/0/lxd/1/lxc/2", "1/lxd/0/lxd/1", "lxc"},
	} {
		if got := state.ParentID(tt.id); got != tt.parent {
			t.Errorf("ParentID(%q) = %q, want %q", tt.id, got, tt.parent)
		}
		if got := state.ContainerTypeOf(tt.id); got != tt.ctype {
			t.Errorf("ContainerTypeOf(%q) = %q, want %q", tt.id, got, tt.ctype)
		}
	}
}

// A container watcher hears about its own machine's direct containers
// only: not those of a machine whose id starts alike, not nested ones, not
// the host itself; the life and removal of its containers reach it.
func TestWatchContainersSeesOnlyItsParent(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	for range 11 { // machines 0 .. 10
		addMachine(t, st, state.MachineParams{})
	}
	w0, initial, err := st.WatchContainers(t.Context(), model, "1", "")
	must(t, err)
	defer w0.Stop()
	if len(initial) != 0 {
		t.Fatalf("initial = %v", initial)
	}
	wLXD, _, err := st.WatchContainers(t.Context(), model, "1", "lxd")
	must(t, err)
	defer wLXD.Stop()

	c := addMachine(t, st, state.MachineParams{ParentID: "1", ContainerType: "lxd"})
	watchertest.StringsAssertChange(t, w0, c.ID)
	watchertest.StringsAssertChange(t, wLXD, c.ID)
	k := addMachine(t, st, state.MachineParams{ParentID: "1", ContainerType: "kvm"})
	watchertest.StringsAssertChange(t, w0, k.ID)
	watchertest.StringsAssertNoChange(t, wLXD)

	wNested, initial, err := st.WatchContainers(t.Context(), model, c.ID, "")
	must(t, err)
	defer wNested.Stop()
	if len(initial) != 0 {
		t.Fatalf("nested initial = %v", initial)
	}
	addMachine(t, st, state.MachineParams{ParentID: "10", ContainerType: "lxd"})
	addMachine(t, st, state.MachineParams{ParentID: "0", ContainerType: "lxd"})
	n := addMachine(t, st, state.MachineParams{ParentID: c.ID, ContainerType: "lxd"})
	must(t, st.SetMachineStatus(t.Context(), model, "1", state.AgentStatus, state.Status{Status: "started"}))
	must(t, st.EnsureMachineDead(t.Context(), model, "2"))
	watchertest.StringsAssertNoChange(t, w0)
	watchertest.StringsAssertChange(t, wNested, n.ID)

	must(t, st.EnsureMachineDead(t.Context(), model, k.ID))
	watchertest.StringsAssertChange(t, w0, k.ID)
	_, err = st.RemoveMachine(t.Context(), model, k.ID)
	must(t, err)
	watchertest.StringsAssertNoChange(t, w0) // its death was reported
}

// BenchmarkAddContainerWatched adds one container per op to a model of
// 1,000 machines, each watched by 10 WatchContainers watchers (the
// provisionbench watch workload at 1,000 agents): the commit's change must
// reach its host's 10 watchers without asking the other 9,990. Compare
// with watchers=0, the same write with nobody watching.
func BenchmarkAddContainerWatched(b *testing.B) {
	const machines = 1000
	for _, perMachine := range []int{0, 10} {
		b.Run(fmt.Sprintf("watchers=%d", machines*perMachine), func(b *testing.B) {
			hub := watcher.NewHub()
			st := statetest.NewWithOptions(b, statetest.Options{Hub: hub})
			var ws []*watcher.Strings
			for range machines {
				m, err := st.AddMachine(b.Context(), model, state.MachineParams{})
				if err != nil {
					b.Fatal(err)
				}
				for range perMachine {
					w, _, err := st.WatchContainers(b.Context(), model, m.ID, "")
					if err != nil {
						b.Fatal(err)
					}
					ws = append(ws, w)
				}
			}
			defer func() {
				for _, w := range ws {
					_ = w.Stop()
				}
			}()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				if _, err := st.AddMachine(b.Context(), model, state.MachineParams{ParentID: fmt.Sprint(n % machines), ContainerType: "lxd"}); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.StopTimer()
			if perMachine > 0 {
				// Every watcher of machine 0 has every container added to it.
				want := (n + machines - 1) / machines
				ids, err := ws[0].Next(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if len(ids) != want || !slices.Contains(ids, "0/lxd/0") {
					b.Fatalf("watcher of machine 0 got %d ids, want %d", len(ids), want)
				}
			}
		})
	}
}

// A container watcher's initial event is its machine's direct containers,
// dead ones included, in id order: not nested ones, not those of a
// machine whose id starts alike. A missing machine is NotFound and a bad
// id NotValid, as for the machine's own calls.
func TestWatchContainersInitial(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	for range 11 { // machines 0 .. 10
		addMachine(t, st, state.MachineParams{})
	}
	l0 := addMachine(t, st, state.MachineParams{ParentID: "1", ContainerType: "lxd"})
	k0 := addMachine(t, st, state.MachineParams{ParentID: "1", ContainerType: "kvm"})
	l1 := addMachine(t, st, state.MachineParams{ParentID: "1", ContainerType: "lxd"})
	addMachine(t, st, state.MachineParams{ParentID: l0.ID, ContainerType: "lxd"})
	addMachine(t, st, state.MachineParams{ParentID: "10", ContainerType: "lxd"})
	must(t, st.EnsureMachineDead(t.Context(), model, l1.ID))

	w, initial, err := st.WatchContainers(t.Context(), model, "1", "")
	must(t, err)
	defer w.Stop()
	if want := []string{k0.ID, l0.ID, l1.ID}; !slices.Equal(initial, want) {
		t.Errorf("initial = %v, want %v", initial, want)
	}
	wl, initial, err := st.WatchContainers(t.Context(), model, "1", "lxd")
	must(t, err)
	defer wl.Stop()
	if want := []string{l0.ID, l1.ID}; !slices.Equal(initial, want) {
		t.Errorf("lxd initial = %v, want %v", initial, want)
	}
	wm, initial, err := st.WatchModelMachines(t.Context(), model)
	must(t, err)
	defer wm.Stop()
	if len(initial) != 11 || initial[2] != "2" || initial[10] != "10" {
		t.Errorf("model machines initial = %v", initial)
	}
	if _, _, err := st.WatchContainers(t.Context(), model, "11", ""); !errors.Is(err, errors.NotFound) {
		t.Errorf("a missing machine: %v, want NotFound", err)
	}
	if _, _, err := st.WatchContainers(t.Context(), model, "1/lxd", ""); !errors.Is(err, errors.NotValid) {
		t.Errorf("a bad machine id: %v, want NotValid", err)
	}
}
