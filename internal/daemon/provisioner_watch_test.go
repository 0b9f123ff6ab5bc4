package daemon_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// pendingNext starts a Next in the background; its result arrives on the
// returned channel.
type nextResult struct {
	ids []string
	err error
}

func pendingStrings(t *testing.T, w *client.StringsWatcher) chan nextResult {
	ch := make(chan nextResult, 1)
	go func() {
		ids, err := w.Next(ctxT(t))
		ch <- nextResult{ids, err}
	}()
	return ch
}

func pendingNotify(t *testing.T, w *client.NotifyWatcher) chan error {
	ch := make(chan error, 1)
	go func() { ch <- w.Next(ctxT(t)) }()
	return ch
}

// notYet asserts that nothing arrives on ch within the no-change window
// (the one accepted fixed wait: an absence can only be sampled).
func notYet[T any](t *testing.T, ch chan T) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("watcher fired early: %+v", r)
	case <-time.After(watchertest.NoChangeWindow):
	}
}

func wantIDs(t *testing.T, ch chan nextResult, want ...string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Next: %v", r.err)
		}
		slices.Sort(r.ids)
		slices.Sort(want)
		if !slices.Equal(r.ids, want) {
			t.Fatalf("Next = %v; want %v", r.ids, want)
		}
	case <-time.After(watchertest.ChangeTimeout):
		t.Fatalf("no event; want %v", want)
	}
}

func wantNotify(t *testing.T, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
	case <-time.After(watchertest.ChangeTimeout):
		t.Fatal("no event")
	}
}

func TestProvisionerWatchers(t *testing.T) {
	f := newProvFixture(t)
	st, model := f.st, f.model
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("WatchModelMachines", func(t *testing.T) {
		for _, v := range []int{11, 1} {
			method := "WatchModelMachines"
			if v == 1 {
				method = "WatchEnvironMachines"
			}
			var w *client.StringsWatcher
			var initial []string
			if v == 11 {
				r := mustCall[params.StringsWatchResult](t, f.ctrl, v, method, nil)
				w, initial = client.NewStringsWatcher(f.ctrl, r.StringsWatcherId), r.Changes
			} else {
				r := mustCall[params.V1StringsWatchResult](t, f.ctrl, v, method, nil)
				w, initial = client.NewStringsWatcher(f.ctrl, r.StringsWatcherId), r.Changes
			}
			for _, id := range initial {
				if strings.Contains(id, "/") {
					t.Errorf("v%d initial has container %q", v, id)
				}
			}
			if !slices.Contains(initial, "0") || !slices.Contains(initial, "1") {
				t.Errorf("v%d initial = %v", v, initial)
			}
			next := pendingStrings(t, w)
			notYet(t, next)
			m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
			must(err)
			wantIDs(t, next, m.ID)
			// Containers, statuses and instance data do not fire.
			next = pendingStrings(t, w)
			_, err = st.AddMachine(t.Context(), model, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
			must(err)
			must(st.SetMachineStatus(t.Context(), model, m.ID, state.AgentStatus, state.Status{Status: "started"}))
			must(st.SetInstanceInfo(t.Context(), model, m.ID, state.InstanceInfo{InstanceID: "i-w", Nonce: "n"}))
			notYet(t, next)
			must(st.SetMachineDying(t.Context(), model, m.ID))
			wantIDs(t, next, m.ID)
			must(w.Stop(ctxT(t)))
		}
	})

	t.Run("death is reported once", func(t *testing.T) {
		r := mustCall[params.StringsWatchResult](t, f.ctrl, 11, "WatchModelMachines", nil)
		w := client.NewStringsWatcher(f.ctrl, r.StringsWatcherId)
		m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
		must(err)
		wantIDs(t, pendingStrings(t, w), m.ID)
		must(st.EnsureMachineDead(t.Context(), model, m.ID))
		wantIDs(t, pendingStrings(t, w), m.ID)
		next := pendingStrings(t, w)
		_, err = st.RemoveMachine(t.Context(), model, m.ID)
		must(err)
		notYet(t, next)
		m2, err := st.AddMachine(t.Context(), model, state.MachineParams{})
		must(err)
		wantIDs(t, next, m2.ID)
	})

	t.Run("WatchContainers and WatchAllContainers", func(t *testing.T) {
		m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
		must(err)
		tag := "machine-" + m.ID
		// The controller may not watch a machine's containers; v11 omits
		// empty changes, 2015 sends [].
		res := mustCall[params.StringsWatchResults](t, f.ctrl, 11, "WatchContainers", params.WatchContainers{Params: []params.WatchContainer{
			{MachineTag: tag, ContainerType: "lxd"}, {MachineTag: tag}, {MachineTag: "machine-99"}, {MachineTag: "bad"}}})
		checkItem(t, "missing", res.Results[2].Error, notFound("99"))
		checkItem(t, "bad", res.Results[3].Error, permErr)
		raw := rawCall(t, f.ctrl, 11, "WatchAllContainers", params.WatchContainers{Params: []params.WatchContainer{{MachineTag: tag}}})
		if strings.Contains(string(raw), "changes") {
			t.Errorf("v11 empty initial event = %s; want no changes key", raw)
		}
		raw = rawCall(t, f.ctrl, 1, "WatchAllContainers", params.V1WatchContainers{Params: []params.V1WatchContainer{{MachineTag: tag}}})
		if !strings.Contains(string(raw), `"Changes":[]`) {
			t.Errorf("v1 empty initial event = %s; want \"Changes\":[]", raw)
		}
		lxd := client.NewStringsWatcher(f.ctrl, res.Results[0].StringsWatcherId)
		all := client.NewStringsWatcher(f.ctrl, res.Results[1].StringsWatcherId)
		nl, na := pendingStrings(t, lxd), pendingStrings(t, all)
		kvm, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: m.ID, ContainerType: "kvm"})
		must(err)
		wantIDs(t, na, kvm.ID)
		notYet(t, nl)
		c, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
		must(err)
		wantIDs(t, nl, c.ID)
		wantIDs(t, pendingStrings(t, all), c.ID)
		// A grandchild is not a direct container.
		nl = pendingStrings(t, lxd)
		_, err = st.AddMachine(t.Context(), model, state.MachineParams{ParentID: c.ID, ContainerType: "lxd"})
		must(err)
		notYet(t, nl)
		must(st.SetMachineDying(t.Context(), model, c.ID))
		wantIDs(t, nl, c.ID)

		// The agent watches its own containers: initial ids inline.
		ar := mustCall[params.StringsWatchResults](t, f.agent, 11, "WatchContainers", params.WatchContainers{Params: []params.WatchContainer{
			{MachineTag: "machine-0", ContainerType: "lxd"}, {MachineTag: "machine-1"}}})
		if !slices.Equal(ar.Results[0].Changes, []string{"0/lxd/0"}) {
			t.Errorf("agent initial = %v", ar.Results[0].Changes)
		}
		checkItem(t, "other machine", ar.Results[1].Error, permErr)
	})

	t.Run("WatchForModelConfigChanges and WatchAPIHostPorts", func(t *testing.T) {
		cr := mustCall[params.NotifyWatchResult](t, f.agent, 11, "WatchForModelConfigChanges", nil)
		hr := mustCall[params.NotifyWatchResult](t, f.agent, 11, "WatchAPIHostPorts", nil)
		v1 := mustCall[params.V1NotifyWatchResult](t, f.agent, 1, "WatchForEnvironConfigChanges", nil)
		cw, hw, v1w := client.NewNotifyWatcher(f.agent, cr.NotifyWatcherId), client.NewNotifyWatcher(f.agent, hr.NotifyWatcherId),
			client.NewNotifyWatcher(f.agent, v1.NotifyWatcherId)
		nc, nh, n1 := pendingNotify(t, cw), pendingNotify(t, hw), pendingNotify(t, v1w)
		notYet(t, nc)
		must(st.UpdateModelConfig(t.Context(), model, map[string]any{"apt-mirror": "http://mirror"}, nil))
		wantNotify(t, nc)
		wantNotify(t, n1)
		notYet(t, nh)
		must(st.SetAPIHostPorts(t.Context(), [][]state.HostPort{{{Value: "10.1.1.1", Type: "ipv4", Scope: "local-cloud", Port: 17070}}}))
		wantNotify(t, nh)
		// The live daemon's registered address comes first: the stored
		// addresses are what a State without a daemon serves.
		addrs := mustCall[params.StringsResult](t, f.agent, 11, "APIAddresses", nil)
		if !slices.Equal(addrs.Result, []string{f.d.Addr()}) {
			t.Errorf("APIAddresses = %v, want the live daemon's %s", addrs.Result, f.d.Addr())
		}
	})

	t.Run("WatchMachineErrorRetry", func(t *testing.T) {
		base := f.clock.Pending()
		r := mustCall[params.NotifyWatchResult](t, f.ctrl, 11, "WatchMachineErrorRetry", nil)
		w := client.NewNotifyWatcher(f.ctrl, r.NotifyWatcherId)
		f.clock.WaitTimers(t, base+1)
		next := pendingNotify(t, w)
		f.clock.Advance(59 * time.Second)
		notYet(t, next)
		f.clock.Advance(time.Second)
		wantNotify(t, next)
		// Re-armed only once the event was delivered.
		f.clock.WaitTimers(t, base+1)
		next = pendingNotify(t, w)
		notYet(t, next)
		f.clock.Advance(time.Minute)
		wantNotify(t, next)
		must(w.Stop(ctxT(t)))
		if f.clock.Pending() != base {
			t.Errorf("timer not stopped with the watcher: %d pending", f.clock.Pending())
		}
	})

	t.Run("WatchModelMachineStartTimes", func(t *testing.T) {
		base := f.clock.Pending()
		r := mustCall[params.StringsWatchResult](t, f.ctrl, 11, "WatchModelMachineStartTimes", nil)
		for _, id := range r.Changes {
			if strings.Contains(id, "/") {
				t.Errorf("initial has a container: %v", r.Changes)
			}
		}
		w := client.NewStringsWatcher(f.ctrl, r.StringsWatcherId)
		next := pendingStrings(t, w)
		must(st.SetMachineAgentStarted(t.Context(), model, "0", "3.3.0-ubuntu-amd64"))
		must(st.SetMachineAgentStarted(t.Context(), model, "1", ""))
		must(st.SetMachineAgentStarted(t.Context(), model, "0/lxd/0", ""))
		f.clock.WaitTimers(t, base+1)
		notYet(t, next)
		f.clock.Advance(500 * time.Millisecond)
		wantIDs(t, next, "0", "1")
		must(w.Stop(ctxT(t)))
	})
}
