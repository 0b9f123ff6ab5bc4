package state

import (
	"context"
	"fmt"
	"testing"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/watcher"
)

// testResume is the Resume a Watch call carries (the facade layer's comes
// from the request's "from-revision").
type testResume struct {
	from    uint64
	covered uint64
}

func (r *testResume) From() uint64       { return r.from }
func (r *testResume) Covered(rev uint64) { r.covered = rev }

func resumeCtx(t *testing.T, from uint64) (context.Context, *testResume) {
	rs := &testResume{from: from}
	return context.WithValue(t.Context(), ResumeKey{}, rs), rs
}

// TestResumedNotifyWatchers: a notify watcher (and the trust hash's
// strings watcher, which its client takes as one) resumed after a
// revision has one event pending if something it watches was written
// after that revision, and none if nothing was, nor if only something it
// does not watch was; opened afresh with a Resume (from 0) it has none
// pending, as a Watch call without one, and tells the revision it covers.
// The API servers' watcher, whose live records no history keeps, always
// has one pending when resumed.
func TestResumedNotifyWatchers(t *testing.T) {
	t.Parallel()
	st, res := openInitialized(t)
	model := res.DefaultModelUUID
	caas := must[Model](t)(st.AddModel(t.Context(), "k8s", ModelTypeCAAS, nil)).UUID
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "db"} {
		must[Application](t)(st.AddCAASApplication(t.Context(), caas, CAASApplicationParams{Name: name, Charm: Charm{URL: "local:web-0", Meta: meta}, Scale: 1}))
	}
	n := 0
	next := func() int { n++; return n }
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	setScale := func(app string) func() {
		return func() { check(st.SetApplicationScale(t.Context(), caas, app, next()+1)) }
	}
	setSpec := func(app string) func() {
		return func() { check(st.SetPodSpec(t.Context(), caas, app, "spec: "+string(rune('a'+next())))) }
	}
	setTrust := func(app string) func() {
		return func() { check(st.UpdateApplicationConfig(t.Context(), caas, app, map[string]any{"n": next()}, nil)) }
	}
	setConfig := func() { check(st.UpdateModelConfig(t.Context(), model, map[string]any{"n": next()}, nil)) }
	addMachine := func() { must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{})) }
	markRemoval := func() {
		m := must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{}))
		check(st.SetMachineDying(t.Context(), model, m.ID))
		check(st.EnsureMachineDead(t.Context(), model, m.ID))
		check(st.MarkMachineForRemoval(t.Context(), model, m.ID))
	}
	host := must[Machine](t)(st.AddMachine(t.Context(), model, MachineParams{}))
	setStatus := func() {
		check(st.SetMachineStatus(t.Context(), model, host.ID, InstanceStatus, Status{Status: "running", Message: fmt.Sprint(next())}))
	}
	setAddrs := func() {
		check(st.SetAPIHostPorts(t.Context(), [][]HostPort{{{Value: "10.0.0.1", Port: 17070 + next()}}}))
	}

	// pending reports whether the watcher has an event pending.
	type watch func(ctx context.Context) (pending func() bool, stop func(), err error)
	notify := func(f func(ctx context.Context) (*watcher.Notify, error)) watch {
		return func(ctx context.Context) (func() bool, func(), error) {
			w, err := f(ctx)
			if err != nil {
				return nil, nil, err
			}
			return w.TakePending, func() { _ = w.Stop() }, nil
		}
	}
	cases := []struct {
		name      string
		watch     watch
		change    func() // something it watches
		unrelated func() // something it does not
	}{
		{"WatchModelConfig", notify(func(ctx context.Context) (*watcher.Notify, error) { return st.WatchModelConfig(ctx, model) }),
			setConfig, addMachine},
		{"WatchMachineRemovals", notify(func(ctx context.Context) (*watcher.Notify, error) { return st.WatchMachineRemovals(ctx, model) }),
			markRemoval, setStatus},
		{"WatchApplicationScale", notify(func(ctx context.Context) (*watcher.Notify, error) {
			return st.WatchApplicationScale(ctx, caas, "web")
		}), setScale("web"), setScale("db")},
		{"WatchApplication", notify(func(ctx context.Context) (*watcher.Notify, error) { return st.WatchApplication(ctx, caas, "web") }),
			setScale("web"), setSpec("web")},
		{"WatchPodSpec", notify(func(ctx context.Context) (*watcher.Notify, error) { return st.WatchPodSpec(ctx, caas, "web") }),
			setSpec("web"), setSpec("db")},
		{"WatchApplicationTrustHash", func(ctx context.Context) (func() bool, func(), error) {
			w, _, err := st.WatchApplicationTrustHash(ctx, caas, "web")
			if err != nil {
				return nil, nil, err
			}
			return func() bool { return len(w.TakePending()) > 0 }, func() { _ = w.Stop() }, nil
		}, setTrust("web"), setTrust("db")},
		{"WatchAPIHostPorts", notify(st.WatchAPIHostPorts), setAddrs, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			open := func(from uint64) (bool, uint64) {
				t.Helper()
				ctx, rs := resumeCtx(t, from)
				pending, stop, err := c.watch(ctx)
				if err != nil {
					t.Fatalf("resumed after %d: %v", from, err)
				}
				defer stop()
				if rs.covered == 0 {
					t.Fatalf("resumed after %d: no revision covered", from)
				}
				return pending(), rs.covered
			}
			fresh, rev := open(0)
			if fresh {
				t.Fatal("a fresh watcher has an event pending (the Watch call is its initial event)")
			}
			if c.unrelated == nil {
				// Nothing of the live servers is in the history.
				if got, _ := open(rev); !got {
					t.Fatal("resumed: no event pending; want one (its live servers leave no history)")
				}
				return
			}
			if got, _ := open(rev); got {
				t.Fatal("resumed after the revision it covered, nothing written since: an event pending")
			}
			c.unrelated()
			if got, _ := open(rev); got {
				t.Fatal("resumed with only something it does not watch written since: an event pending")
			}
			c.change()
			got, now := open(rev)
			if !got {
				t.Fatal("resumed with what it watches written since: no event pending")
			}
			if got, _ := open(now); got {
				t.Fatal("resumed after the latest revision: an event pending")
			}
		})
	}
}
