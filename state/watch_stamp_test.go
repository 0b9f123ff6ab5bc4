package state

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// openInitialized opens and initialises a state for this package's own
// tests (statetest imports state, so it cannot be used here).
func openInitialized(t *testing.T) (*State, InitResult) {
	t.Helper()
	st, err := openBolt(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	res, err := st.Initialize(t.Context(), InitArgs{AdminPassword: "pw", AgentPassword: "agent-password-long-enough", AgentNonce: "n"})
	if err != nil {
		t.Fatal(err)
	}
	return st, res
}

// openBolt opens the state in a bbolt file as the daemon does, its hub fed
// by the store.
func openBolt(path string) (*State, error) {
	hub := watcher.NewHub()
	s, err := boltstore.Open(path, boltstore.Options{Feed: Feed(hub, nil)})
	if err != nil {
		return nil, err
	}
	return Open(s, Options{Hub: hub})
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// A change committed between a watcher's subscription and its snapshot is
// in the snapshot. Subscribed the way every Watch method was before the
// revision stamp, the watcher wakes for it anyway: a spurious event (this
// part shows it). Stamped with the snapshot's revision, none of the Watch
// methods does; a change after the snapshot still wakes them.
func TestWatchersIgnoreWhatTheirSnapshotHolds(t *testing.T) {
	t.Parallel()
	st, res := openInitialized(t)
	model := res.DefaultModelUUID

	t.Run("unstamped, as before", func(t *testing.T) {
		w := watcher.NewStrings()
		defer w.Stop()
		l := &lifecycle{w: w, match: func(id string) bool { return ParentID(id) == "" }}
		w.OnStop(st.hub.Subscribe(watcher.Filter{Kind: KindMachine, Model: model,
			Fields: []string{watcher.FieldCreated, watcher.FieldLife, watcher.FieldRemoved}}, l.sink))
		m := must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{})) // between subscription and snapshot
		var ms []Machine
		if err := st.view(t.Context(), func(r reader) (err error) { ms, err = machines(r, model); return err }); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(ms, func(x Machine) bool { return x.ID == m.ID }) {
			t.Fatalf("the snapshot lacks machine %s", m.ID)
		}
		watchertest.StringsAssertChange(t, w, m.ID) // spurious: the snapshot had it
	})

	caas := must[Model](t)(st.AddModel(t.Context(), "k8s", ModelTypeCAAS, nil)).UUID
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	must[Application](t)(st.AddCAASApplication(t.Context(), caas, CAASApplicationParams{Name: "web", Charm: Charm{URL: "local:web-0", Meta: meta}, Scale: 1}))
	host := must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{}))
	n := 0
	next := func() int { n++; return n }
	addMachine := func() { must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{})) }
	addContainer := func() {
		must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{ParentID: host.ID, ContainerType: "lxd"}))
	}
	addApp := func() {
		must[Application](t)(st.AddCAASApplication(t.Context(), caas, CAASApplicationParams{Name: "app" + string(rune('a'+next())),
			Charm: Charm{URL: "local:web-0", Meta: meta}}))
	}
	setConfig := func() {
		if err := st.UpdateModelConfig(t.Context(), model, map[string]any{"n": next()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	setScale := func() {
		if err := st.SetApplicationScale(t.Context(), caas, "web", next()+1); err != nil {
			t.Fatal(err)
		}
	}
	setSpec := func() {
		if err := st.SetPodSpec(t.Context(), caas, "web", "spec: "+string(rune('a'+next()))); err != nil {
			t.Fatal(err)
		}
	}
	setAddrs := func() {
		if err := st.SetAPIHostPorts(t.Context(), [][]HostPort{{{Value: "10.0.0.1", Port: 17070 + next()}}}); err != nil {
			t.Fatal(err)
		}
	}
	setTrust := func() {
		if err := st.UpdateApplicationConfig(t.Context(), caas, "web", map[string]any{"n": next()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	addModel := func() { must[Model](t)(st.AddModel(t.Context(), "m"+string(rune('a'+next())), ModelTypeIAAS, nil)) }

	stringWatches := []struct {
		name   string
		watch  func() (*watcher.Strings, error)
		change func()
	}{
		{"WatchModelMachines", func() (*watcher.Strings, error) {
			w, _, err := st.WatchModelMachines(t.Context(), model)
			return w, err
		}, addMachine},
		{"WatchContainers", func() (*watcher.Strings, error) {
			w, _, err := st.WatchContainers(t.Context(), model, host.ID, "")
			return w, err
		}, addContainer},
		{"WatchApplications", func() (*watcher.Strings, error) { w, _, err := st.WatchApplications(t.Context(), caas); return w, err }, addApp},
		{"WatchModels", func() (*watcher.Strings, error) { w, _, err := st.WatchModels(t.Context()); return w, err }, addModel},
		{"WatchModelChanges", func() (*watcher.Strings, error) { w, _, err := st.WatchModelChanges(t.Context(), model); return w, err }, addMachine},
		{"WatchApplicationTrustHash", func() (*watcher.Strings, error) {
			w, _, err := st.WatchApplicationTrustHash(t.Context(), caas, "web")
			return w, err
		}, setTrust},
	}
	for _, c := range stringWatches {
		t.Run(c.name, func(t *testing.T) {
			st.afterSubscribe = c.change
			w, err := c.watch()
			st.afterSubscribe = nil
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			watchertest.StringsAssertNoChange(t, w)
			c.change()
			if _, err := w.Next(t.Context()); err != nil {
				t.Fatalf("a change after the snapshot: %v", err)
			}
		})
	}

	notifies := []struct {
		name   string
		watch  func() (*watcher.Notify, error)
		change func()
	}{
		{"WatchModelConfig", func() (*watcher.Notify, error) { return st.WatchModelConfig(t.Context(), model) }, setConfig},
		{"WatchApplicationScale", func() (*watcher.Notify, error) { return st.WatchApplicationScale(t.Context(), caas, "web") }, setScale},
		{"WatchApplication", func() (*watcher.Notify, error) { return st.WatchApplication(t.Context(), caas, "web") }, setScale},
		{"WatchPodSpec", func() (*watcher.Notify, error) { return st.WatchPodSpec(t.Context(), caas, "web") }, setSpec},
		{"WatchAPIHostPorts", func() (*watcher.Notify, error) { return st.WatchAPIHostPorts(t.Context()) }, setAddrs},
	}
	for _, c := range notifies {
		t.Run(c.name, func(t *testing.T) {
			st.afterSubscribe = c.change
			w, err := c.watch()
			st.afterSubscribe = nil
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			watchertest.NotifyAssertNoChange(t, w)
			c.change()
			watchertest.NotifyAssertChange(t, w)
		})
	}

	t.Run("WatchModelMachineStartTimes", func(t *testing.T) {
		clock := watchertest.NewFakeClock(time.Unix(0, 0))
		st.afterSubscribe = func() {
			if err := st.SetMachineAgentStarted(t.Context(), model, host.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		w, _, err := st.WatchModelMachineStartTimes(t.Context(), model, clock, time.Second)
		st.afterSubscribe = nil
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if n := clock.Pending(); n != 0 {
			t.Errorf("%d batching timers armed by a change the snapshot holds", n)
		}
		if err := st.SetMachineAgentStarted(t.Context(), model, host.ID, ""); err != nil {
			t.Fatal(err)
		}
		if n := clock.Pending(); n != 1 {
			t.Errorf("%d batching timers after a change, want 1", n)
		}
	})
}

// A stamper passes on, in order, the changes newer than the stamp, those
// that came before the stamp was known included, and drops the others.
func TestStamper(t *testing.T) {
	t.Parallel()
	var got []uint64
	s := stamp(func(rev uint64, _ watcher.Change) { got = append(got, rev) }, resetFunc(func() { t.Fatal("reset") }))
	s.Sink(3, watcher.Change{})
	s.Sink(5, watcher.Change{})
	if len(got) != 0 {
		t.Fatalf("delivered %v before the stamp", got)
	}
	s.Stamp(4)
	s.Sink(4, watcher.Change{})
	s.Sink(6, watcher.Change{})
	if !slices.Equal(got, []uint64{5, 6}) {
		t.Errorf("delivered %v, want [5 6]", got)
	}
}

// resetFunc is a func as stamp's reset.
type resetFunc func()

func (f resetFunc) Reset() { f() }
