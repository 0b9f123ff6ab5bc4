package provisioner_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func TestProvisionerWatchers(t *testing.T) {
	f := testkit.NewProvFixture(t)
	st, model := f.St, f.Model
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
				r := testkit.MustCall[params.StringsWatchResult](t, f.Ctrl, v, method, nil)
				w, initial = client.NewStringsWatcher(f.Ctrl, r.StringsWatcherId), r.Changes
			} else {
				r := testkit.MustCall[params.V1StringsWatchResult](t, f.Ctrl, v, method, nil)
				w, initial = client.NewStringsWatcher(f.Ctrl, r.StringsWatcherId), r.Changes
			}
			for _, id := range initial {
				if strings.Contains(id, "/") {
					t.Errorf("v%d initial has container %q", v, id)
				}
			}
			if !slices.Contains(initial, "0") || !slices.Contains(initial, "1") {
				t.Errorf("v%d initial = %v", v, initial)
			}
			next := testkit.PendingStrings(t, w)
			testkit.NotYet(t, next)
			m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
			must(err)
			testkit.WantIDs(t, next, m.ID)
			// Containers, statuses and instance data do not fire.
			next = testkit.PendingStrings(t, w)
			_, err = st.AddMachine(t.Context(), model, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
			must(err)
			must(st.SetMachineStatus(t.Context(), model, m.ID, state.AgentStatus, state.Status{Status: "started"}))
			must(st.SetInstanceInfo(t.Context(), model, m.ID, state.InstanceInfo{InstanceID: "i-w", Nonce: "n"}))
			testkit.NotYet(t, next)
			must(st.SetMachineDying(t.Context(), model, m.ID))
			testkit.WantIDs(t, next, m.ID)
			must(w.Stop(testkit.Ctx(t)))
		}
	})

	t.Run("death is reported once", func(t *testing.T) {
		r := testkit.MustCall[params.StringsWatchResult](t, f.Ctrl, 11, "WatchModelMachines", nil)
		w := client.NewStringsWatcher(f.Ctrl, r.StringsWatcherId)
		m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
		must(err)
		testkit.WantIDs(t, testkit.PendingStrings(t, w), m.ID)
		must(st.EnsureMachineDead(t.Context(), model, m.ID))
		testkit.WantIDs(t, testkit.PendingStrings(t, w), m.ID)
		next := testkit.PendingStrings(t, w)
		_, err = st.RemoveMachine(t.Context(), model, m.ID)
		must(err)
		testkit.NotYet(t, next)
		m2, err := st.AddMachine(t.Context(), model, state.MachineParams{})
		must(err)
		testkit.WantIDs(t, next, m2.ID)
	})

	t.Run("WatchContainers and WatchAllContainers", func(t *testing.T) {
		m, err := st.AddMachine(t.Context(), model, state.MachineParams{})
		must(err)
		tag := "machine-" + m.ID
		// The controller may not watch a machine's containers; v11 omits
		// empty changes, 2015 sends [].
		res := testkit.MustCall[params.StringsWatchResults](t, f.Ctrl, 11, "WatchContainers", params.WatchContainers{Params: []params.WatchContainer{
			{MachineTag: tag, ContainerType: "lxd"}, {MachineTag: tag}, {MachineTag: "machine-99"}, {MachineTag: "bad"}}})
		checkItem(t, "missing", res.Results[2].Error, notFound("99"))
		checkItem(t, "bad", res.Results[3].Error, permErr)
		raw := testkit.RawCall(t, f.Ctrl, 11, "WatchAllContainers", params.WatchContainers{Params: []params.WatchContainer{{MachineTag: tag}}})
		if strings.Contains(string(raw), "changes") {
			t.Errorf("v11 empty initial event = %s; want no changes key", raw)
		}
		raw = testkit.RawCall(t, f.Ctrl, 1, "WatchAllContainers", params.V1WatchContainers{Params: []params.V1WatchContainer{{MachineTag: tag}}})
		if !strings.Contains(string(raw), `"Changes":[]`) {
			t.Errorf("v1 empty initial event = %s; want \"Changes\":[]", raw)
		}
		lxd := client.NewStringsWatcher(f.Ctrl, res.Results[0].StringsWatcherId)
		all := client.NewStringsWatcher(f.Ctrl, res.Results[1].StringsWatcherId)
		nl, na := testkit.PendingStrings(t, lxd), testkit.PendingStrings(t, all)
		kvm, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: m.ID, ContainerType: "kvm"})
		must(err)
		testkit.WantIDs(t, na, kvm.ID)
		testkit.NotYet(t, nl)
		c, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
		must(err)
		testkit.WantIDs(t, nl, c.ID)
		testkit.WantIDs(t, testkit.PendingStrings(t, all), c.ID)
		// A grandchild is not a direct container.
		nl = testkit.PendingStrings(t, lxd)
		_, err = st.AddMachine(t.Context(), model, state.MachineParams{ParentID: c.ID, ContainerType: "lxd"})
		must(err)
		testkit.NotYet(t, nl)
		must(st.SetMachineDying(t.Context(), model, c.ID))
		testkit.WantIDs(t, nl, c.ID)

		// The agent watches its own containers: initial ids inline.
		ar := testkit.MustCall[params.StringsWatchResults](t, f.Agent, 11, "WatchContainers", params.WatchContainers{Params: []params.WatchContainer{
			{MachineTag: "machine-0", ContainerType: "lxd"}, {MachineTag: "machine-1"}}})
		if !slices.Equal(ar.Results[0].Changes, []string{"0/lxd/0"}) {
			t.Errorf("agent initial = %v", ar.Results[0].Changes)
		}
		checkItem(t, "other machine", ar.Results[1].Error, permErr)
	})

	t.Run("WatchForModelConfigChanges and WatchAPIHostPorts", func(t *testing.T) {
		cr := testkit.MustCall[params.NotifyWatchResult](t, f.Agent, 11, "WatchForModelConfigChanges", nil)
		hr := testkit.MustCall[params.NotifyWatchResult](t, f.Agent, 11, "WatchAPIHostPorts", nil)
		v1 := testkit.MustCall[params.V1NotifyWatchResult](t, f.Agent, 1, "WatchForEnvironConfigChanges", nil)
		cw, hw, v1w := client.NewNotifyWatcher(f.Agent, cr.NotifyWatcherId), client.NewNotifyWatcher(f.Agent, hr.NotifyWatcherId),
			client.NewNotifyWatcher(f.Agent, v1.NotifyWatcherId)
		nc, nh, n1 := testkit.PendingNotify(t, cw), testkit.PendingNotify(t, hw), testkit.PendingNotify(t, v1w)
		testkit.NotYet(t, nc)
		must(st.UpdateModelConfig(t.Context(), model, map[string]any{"apt-mirror": "http://mirror"}, nil))
		testkit.WantNotify(t, nc)
		testkit.WantNotify(t, n1)
		testkit.NotYet(t, nh)
		must(st.SetAPIHostPorts(t.Context(), [][]state.HostPort{{{Value: "10.1.1.1", Type: "ipv4", Scope: "local-cloud", Port: 17070}}}))
		testkit.WantNotify(t, nh)
		// The live daemon's registered address comes first: the stored
		// addresses are what a State without a daemon serves.
		addrs := testkit.MustCall[params.StringsResult](t, f.Agent, 11, "APIAddresses", nil)
		if !slices.Equal(addrs.Result, []string{f.D.Addr()}) {
			t.Errorf("APIAddresses = %v, want the live daemon's %s", addrs.Result, f.D.Addr())
		}
	})

	t.Run("WatchMachineErrorRetry", func(t *testing.T) {
		base := f.Clock.Pending()
		r := testkit.MustCall[params.NotifyWatchResult](t, f.Ctrl, 11, "WatchMachineErrorRetry", nil)
		w := client.NewNotifyWatcher(f.Ctrl, r.NotifyWatcherId)
		f.Clock.WaitTimers(t, base+1)
		next := testkit.PendingNotify(t, w)
		f.Clock.Advance(59 * time.Second)
		testkit.NotYet(t, next)
		f.Clock.Advance(time.Second)
		testkit.WantNotify(t, next)
		// Re-armed only once the event was delivered.
		f.Clock.WaitTimers(t, base+1)
		next = testkit.PendingNotify(t, w)
		testkit.NotYet(t, next)
		f.Clock.Advance(time.Minute)
		testkit.WantNotify(t, next)
		must(w.Stop(testkit.Ctx(t)))
		if f.Clock.Pending() != base {
			t.Errorf("timer not stopped with the watcher: %d pending", f.Clock.Pending())
		}
	})

	t.Run("WatchModelMachineStartTimes", func(t *testing.T) {
		base := f.Clock.Pending()
		r := testkit.MustCall[params.StringsWatchResult](t, f.Ctrl, 11, "WatchModelMachineStartTimes", nil)
		for _, id := range r.Changes {
			if strings.Contains(id, "/") {
				t.Errorf("initial has a container: %v", r.Changes)
			}
		}
		w := client.NewStringsWatcher(f.Ctrl, r.StringsWatcherId)
		next := testkit.PendingStrings(t, w)
		must(st.SetMachineAgentStarted(t.Context(), model, "0", "3.3.0-ubuntu-amd64"))
		must(st.SetMachineAgentStarted(t.Context(), model, "1", ""))
		must(st.SetMachineAgentStarted(t.Context(), model, "0/lxd/0", ""))
		f.Clock.WaitTimers(t, base+1)
		testkit.NotYet(t, next)
		f.Clock.Advance(500 * time.Millisecond)
		testkit.WantIDs(t, next, "0", "1")
		must(w.Stop(testkit.Ctx(t)))
	})
}
