package state_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// The decisions two daemons sharing a store must not contradict are taken
// inside one store transaction. These tests race two State instances on one
// real etcd prefix, as two daemons of one controller: each has its own
// replica of the store and its own process-local everything, and only the
// store's optimistic transactions stand between them.

// racers is how many goroutines each of the two States writes from, and
// rounds how many writes each makes.
const (
	racers = 4
	rounds = 5
)

// race runs fn(st, g, r) from racers goroutines on each of sts, rounds times
// each, and then waits until every State has applied every revision
// written.
func race(t *testing.T, sts []*state.State, fn func(st *state.State, g, r int) error) {
	t.Helper()
	var wg sync.WaitGroup
	for i, st := range sts {
		for g := range racers {
			wg.Go(func() {
				for r := range rounds {
					if err := fn(st, i*racers+g, r); err != nil {
						t.Errorf("state %d, goroutine %d, round %d: %v", i, g, r, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	syncStates(t, sts)
}

// syncs numbers syncStates' marker commits.
var syncs atomic.Int64

// syncStates waits until each of sts has applied every commit any of them
// made before the call (bounded).
func syncStates(t *testing.T, sts []*state.State) {
	t.Helper()
	// A commit of the first state marks the point to reach: every commit
	// of the prefix before it has a lower revision. The states' own
	// Revision will not do: a state opened on a shared etcd starts at the
	// cluster's revision, which writes under other prefixes (other tests)
	// move and the other states' watches of this prefix never reach.
	if err := sts[0].UpdateModelConfig(t.Context(), statetest.ControllerModelUUID, map[string]any{"test-sync": syncs.Add(1)}, nil); err != nil {
		t.Fatalf("syncing states: %v", err)
	}
	rev := sts[0].Revision()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, st := range sts {
		if err := st.Store().WaitApplied(ctx, rev); err != nil {
			t.Fatalf("state %d applying revision %d: %v", i, rev, err)
		}
	}
}

func TestTwoStatesNeverShareAMachineID(t *testing.T) {
	t.Parallel()
	sts := etcdStates(t, 2)
	model := statetest.DefaultModelUUID
	var (
		mu  sync.Mutex
		ids []string
	)
	host, err := sts[0].AddMachine(t.Context(), model, state.MachineParams{})
	if err != nil {
		t.Fatal(err)
	}
	syncStates(t, sts)
	race(t, sts, func(st *state.State, g, r int) error {
		p := state.MachineParams{}
		if g%2 == 1 { // containers of one host: the host's own sequence
			p = state.MachineParams{ParentID: host.ID, ContainerType: "lxd"}
		}
		m, err := st.AddMachine(t.Context(), model, p)
		if err != nil {
			return err
		}
		mu.Lock()
		ids = append(ids, m.ID)
		mu.Unlock()
		return nil
	})
	if t.Failed() {
		return
	}
	want := 2 * racers * rounds
	if len(ids) != want || len(compact(ids)) != want {
		t.Fatalf("%d machines with %d distinct ids, want %d: %v", len(ids), len(compact(ids)), want, ids)
	}
	for i, st := range sts {
		ms, err := st.Machines(t.Context(), model)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != want+1 {
			t.Errorf("state %d: %d machines, want %d", i, len(ms), want+1)
		}
	}
	// The ids are the sequences' numbers, none skipped: 1..n/2 for the
	// machines, host/lxd/0.. for the containers.
	var top, lxd int
	for _, id := range ids {
		if state.ParentID(id) == "" {
			top++
		} else {
			lxd++
		}
	}
	for n := 1; n <= top; n++ {
		if !slices.Contains(ids, fmt.Sprint(n)) {
			t.Errorf("machine %d missing from %v", n, ids)
		}
	}
	for n := range lxd {
		if !slices.Contains(ids, fmt.Sprintf("%s/lxd/%d", host.ID, n)) {
			t.Errorf("container %s/lxd/%d missing from %v", host.ID, n, ids)
		}
	}
}

// compact returns the distinct values of ss, sorted.
func compact(ss []string) []string {
	ss = slices.Clone(ss)
	slices.Sort(ss)
	return slices.Compact(ss)
}

func TestTwoStatesNeverShareAUnitName(t *testing.T) {
	t.Parallel()
	sts := etcdStates(t, 2)
	model := statetest.DefaultModelUUID
	meta, err := charm.ParseMeta([]byte("name: web\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sts[0].AddIAASApplication(t.Context(), model, state.IAASApplicationParams{Name: "web", Charm: state.Charm{Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	m0, err := sts[0].AddMachine(t.Context(), model, state.MachineParams{})
	if err != nil {
		t.Fatal(err)
	}
	syncStates(t, sts)
	var (
		mu       sync.Mutex
		units    []string
		machines []string
	)
	race(t, sts, func(st *state.State, g, r int) error {
		if g%2 == 0 { // AddUnit on the one machine
			u, err := st.AddUnit(t.Context(), model, "web", m0.ID, "")
			if err != nil {
				return err
			}
			mu.Lock()
			units = append(units, u.Name)
			mu.Unlock()
			return nil
		}
		// AddUnits: two units, one on machine 0, one on a new machine.
		us, ms, err := st.AddUnits(t.Context(), model, "web", state.AddUnitsParams{Count: 2, To: []string{m0.ID}})
		if err != nil {
			return err
		}
		if len(us) != 2 || len(ms) != 1 {
			return fmt.Errorf("AddUnits = %v, %v; want 2 units, 1 machine", us, ms)
		}
		mu.Lock()
		units, machines = append(units, us...), append(machines, ms...)
		mu.Unlock()
		return nil
	})
	if t.Failed() {
		return
	}
	want := racers * rounds * 3 // half the goroutines add one unit a round, half two
	if len(units) != want || len(compact(units)) != want {
		t.Fatalf("%d units with %d distinct names, want %d: %v", len(units), len(compact(units)), want, units)
	}
	for n := range want {
		if !slices.Contains(units, fmt.Sprintf("web/%d", n)) {
			t.Errorf("unit web/%d missing", n)
		}
	}
	if len(compact(machines)) != len(machines) || slices.Contains(machines, m0.ID) {
		t.Errorf("machines made for units: %v (machine 0 is %s)", machines, m0.ID)
	}
	for i, st := range sts {
		us, err := st.Units(t.Context(), model)
		if err != nil || len(us) != want {
			t.Errorf("state %d: %d units, %v; want %d", i, len(us), err, want)
		}
		on0, err := st.UnitsOnMachine(t.Context(), model, m0.ID)
		if err != nil || len(on0) != 2*racers*rounds {
			t.Errorf("state %d: %d units on machine 0, %v; want %d", i, len(on0), err, 2*racers*rounds)
		}
	}
}

// TestTwoStatesDeployLocalCharms: deploys of different metadata under one
// charm name, through two States at once, get distinct local charm URLs, and
// each application's charm is the metadata it was deployed with; deploys of
// the same metadata share one.
func TestTwoStatesDeployLocalCharms(t *testing.T) {
	t.Parallel()
	sts := etcdStates(t, 2)
	model := statetest.DefaultModelUUID
	const variants = 3
	metas := make([]*charm.Meta, variants)
	for v := range metas {
		var err error
		metas[v], err = charm.ParseMeta(fmt.Appendf(nil, "name: app\nsummary: variant %d\n", v))
		if err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu     sync.Mutex
		deploy = map[string]int{} // application -> variant
	)
	race(t, sts, func(st *state.State, g, r int) error {
		name, v := fmt.Sprintf("app%c%c", 'a'+g, 'a'+r), (g+r)%variants
		a, err := st.AddIAASApplication(t.Context(), model, state.IAASApplicationParams{Name: name, Charm: state.Charm{Meta: metas[v]}})
		if err != nil {
			return err
		}
		if a.CharmURL != fmt.Sprintf("local:app-%d", a.CharmRevision) {
			return fmt.Errorf("application %s: charm %s revision %d", name, a.CharmURL, a.CharmRevision)
		}
		mu.Lock()
		deploy[name] = v
		mu.Unlock()
		return nil
	})
	if t.Failed() {
		return
	}
	for i, st := range sts {
		urlOf := map[int]string{}
		for name, v := range deploy {
			a, err := st.Application(t.Context(), model, name)
			if err != nil {
				t.Fatal(err)
			}
			ch, err := st.Charm(t.Context(), model, a.CharmURL)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Meta.Summary != metas[v].Summary {
				t.Errorf("state %d: application %s deployed with %q runs charm %s of %q", i, name, metas[v].Summary, a.CharmURL, ch.Meta.Summary)
			}
			if u, ok := urlOf[v]; ok && u != a.CharmURL {
				t.Errorf("state %d: variant %d stored as %s and %s", i, v, u, a.CharmURL)
			}
			urlOf[v] = a.CharmURL
		}
		if len(compact(slices.Collect(mapValues(urlOf)))) != variants {
			t.Errorf("state %d: variants stored as %v, want %d distinct URLs", i, urlOf, variants)
		}
	}
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestTwoStatesScaleAndUnits: the unit provisioner's reports through one
// State and AddCAASUnit through the other never give two units one number.
func TestTwoStatesCAASUnits(t *testing.T) {
	t.Parallel()
	sts := etcdStates(t, 2)
	m, err := sts[0].AddModel(t.Context(), "k8s", state.ModelTypeCAAS, nil)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := charm.ParseMeta([]byte("name: db\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sts[0].AddCAASApplication(t.Context(), m.UUID, state.CAASApplicationParams{Name: "db", Charm: state.Charm{Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	syncStates(t, sts)
	race(t, sts, func(st *state.State, g, r int) error {
		pod := fmt.Sprintf("pod-%d-%d", g, r)
		if g%2 == 0 {
			_, err := st.AddCAASUnit(t.Context(), m.UUID, "db", state.CAASUnitParams{ProviderID: pod})
			return err
		}
		// A pod the application has no unit for: a unit is added for it.
		units, err := st.CAASUnits(t.Context(), m.UUID, "db")
		if err != nil {
			return err
		}
		pods := []state.Pod{{ProviderID: pod, Status: "running"}}
		for _, u := range units {
			if id := u.ProviderID(); id != "" {
				pods = append(pods, state.Pod{ProviderID: id, Status: "running"})
			}
		}
		_, err = st.UpdateCAASUnits(t.Context(), m.UUID, "db", state.UnitsUpdate{Pods: pods})
		return err
	})
	if t.Failed() {
		return
	}
	units, err := sts[1].CAASUnits(t.Context(), m.UUID, "db")
	if err != nil {
		t.Fatal(err)
	}
	names, pods := map[string]bool{}, map[string]string{}
	for _, u := range units {
		if names[u.Name] {
			t.Errorf("unit %s twice", u.Name)
		}
		names[u.Name] = true
		if id := u.ProviderID(); id != "" {
			if other, dup := pods[id]; dup {
				t.Errorf("pod %s is the pod of units %s and %s", id, other, u.Name)
			}
			pods[id] = u.Name
		}
	}
	if want := 2 * racers * rounds; len(pods) != want {
		t.Errorf("%d pods with units, want %d: %v", len(pods), want, pods)
	}
}

// TestSetInstanceStatusErrorIsOneCommit: an instance status of error sets
// the agent status in the same commit, and a bulk of statuses commits its
// valid items together, each refused item with its own error.
func TestSetMachineStatusesInOneCommit(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	m0 := statetest.AddMachine(t, st, model, "")
	m1 := statetest.AddMachine(t, st, model, "")

	rev := st.Revision()
	if err := st.SetMachineStatus(t.Context(), model, m0.ID, state.InstanceStatus, state.Status{Status: "provisioning error", Message: "no capacity"}); err != nil {
		t.Fatal(err)
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("revision %d -> %d, want one commit", rev, st.Revision())
	}
	m, err := st.Machine(t.Context(), model, m0.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.InstanceStatus.Status != "provisioning error" || m.Status.Status != "error" || m.Status.Message != "no capacity" {
		t.Errorf("statuses after a provisioning error: instance %+v, agent %+v", m.InstanceStatus, m.Status)
	}
	if err := st.SetMachineStatus(t.Context(), model, m1.ID, state.InstanceStatus, state.Status{Status: "error"}); err != nil {
		t.Fatal(err)
	}
	if m, _ := st.Machine(t.Context(), model, m1.ID); m.Status.Status != "error" || m.Status.Message != "error" {
		t.Errorf("agent status after an instance error without a message: %+v", m.Status)
	}

	rev = st.Revision()
	errs := st.SetMachineStatuses(t.Context(), model, []state.MachineStatusArg{
		{ID: m0.ID, Kind: state.AgentStatus, Status: state.Status{Status: "started"}},
		{ID: "42", Kind: state.AgentStatus, Status: state.Status{Status: "started"}},
		{ID: m1.ID, Kind: state.ModificationStatus, Status: state.Status{Status: "applied"}},
		{ID: m1.ID, Kind: state.AgentStatus, Status: state.Status{Status: "bogus"}},
		{ID: m1.ID, Kind: state.InstanceStatus, Status: state.Status{Status: "running"}},
	})
	want := []string{"", "machine 42 not found", "", `cannot set invalid status "bogus"`, ""}
	for i, err := range errs {
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want[i] {
			t.Errorf("item %d: %q, want %q", i, got, want[i])
		}
	}
	if !jujuerrors.Is(errs[1], jujuerrors.NotFound) || !jujuerrors.Is(errs[3], jujuerrors.NotValid) {
		t.Errorf("error kinds: %v, %v", errs[1], errs[3])
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("revision %d -> %d, want one commit for the bulk", rev, st.Revision())
	}
	m, _ = st.Machine(t.Context(), model, m0.ID)
	m1n, _ := st.Machine(t.Context(), model, m1.ID)
	if m.Status.Status != "started" || m1n.ModificationStatus.Status != "applied" || m1n.InstanceStatus.Status != "running" || m1n.Status.Status != "error" {
		t.Errorf("after the bulk: 0 agent %q; 1 modification %q, instance %q, agent %q (the refused item is left out)",
			m.Status.Status, m1n.ModificationStatus.Status, m1n.InstanceStatus.Status, m1n.Status.Status)
	}
	// A bulk of refused items only commits nothing.
	rev = st.Revision()
	errs = st.SetMachineStatuses(t.Context(), model, []state.MachineStatusArg{{ID: "42", Kind: state.AgentStatus, Status: state.Status{Status: "started"}}})
	if len(errs) != 1 || errs[0] == nil || st.Revision() != rev {
		t.Errorf("refused bulk: %v, revision %d -> %d", errs, rev, st.Revision())
	}
}
