package state_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store"
)

// removalFixture is a model with a subnet, a provisioned host (machine h)
// and its container c: an address allocated to c, link-layer devices, a
// volume attached, and the id sequence of a container c hosted once.
type removalFixture struct {
	st          *state.State
	model       string
	host, ctr   string
	addr        state.IPAddress
	vol         string
	nestedSeqID string // the store key of c's own container sequence
}

func newRemovalFixture(t *testing.T) *removalFixture {
	t.Helper()
	st := statetest.New(t)
	model := statetest.DefaultModelUUID
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.0.0.0/24", AllocatableIPLow: "10.0.0.10", AllocatableIPHigh: "10.0.0.20"})
	must(err)
	host := statetest.AddMachine(t, st, model, "h")
	c, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: host.ID, ContainerType: "lxd",
		Volumes: []state.VolumeParams{{Pool: "loop", Size: 1024}}})
	must(err)
	must(st.SetInstanceInfo(t.Context(), model, c.ID, state.InstanceInfo{InstanceID: "c-0", Nonce: "cn",
		LinkLayerDevices: []state.LinkLayerDevice{{Name: "eth0", MACAddress: "00:16:3e:00:00:01", ProviderID: "nic-1", Addresses: []string{"10.0.0.10/24"}}}}))
	addr, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/24", c.ID, "eth0", "00:16:3e:00:00:01", 0)
	must(err)
	vols, err := st.MachineVolumes(t.Context(), model, c.ID)
	must(err)
	if len(vols) != 1 {
		t.Fatalf("volumes of %s: %v", c.ID, vols)
	}
	// A container of the container, hosted and removed: its sequence stays.
	nested, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: c.ID, ContainerType: "lxd"})
	must(err)
	must(st.EnsureMachineDead(t.Context(), model, nested.ID))
	_, err = st.RemoveMachine(t.Context(), model, nested.ID)
	must(err)
	f := &removalFixture{st: st, model: model, host: host.ID, ctr: c.ID, addr: addr, vol: vols[0].ID,
		nestedSeqID: store.Key("sequence", model+"/container/"+c.ID+"/lxd")}
	if !f.has(t, f.nestedSeqID) {
		t.Fatalf("no sequence %s", f.nestedSeqID)
	}
	return f
}

// has reports whether the store holds key.
func (f *removalFixture) has(t *testing.T, key string) bool {
	t.Helper()
	var ok bool
	if err := f.st.Store().View(context.Background(), func(r store.Reader) error {
		var err error
		_, ok, err = r.Get(key)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ok
}

// markDead makes machine id dead and marks it for removal.
func (f *removalFixture) markDead(t *testing.T, id string) {
	t.Helper()
	if err := f.st.EnsureMachineDead(t.Context(), f.model, id); err != nil {
		t.Fatal(err)
	}
	if err := f.st.MarkMachineForRemoval(t.Context(), f.model, id); err != nil {
		t.Fatal(err)
	}
}

// TestCompleteMachineRemovals: a container marked for removal is removed
// in one transaction with what is recorded of it (its address released,
// its volume detached, its own container sequence, its record with its
// instance data, statuses and link-layer devices); the host's record is
// untouched. As Juju's (state/machineremovals.go): a machine already gone
// is skipped, so a second removal is a no-op that commits nothing; a
// machine not marked fails the whole call, which removes nothing; an
// invalid id fails it too.
func TestCompleteMachineRemovals(t *testing.T) {
	t.Parallel()
	f := newRemovalFixture(t)
	st, model := f.st, f.model
	hostBefore, err := st.Machine(t.Context(), model, f.host)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.MachineRemovals(t.Context(), model); err != nil || len(got) != 0 {
		t.Fatalf("MachineRemovals = %v, %v; want none", got, err)
	}

	// Not marked: refused; with a marked one in the same call, nothing is
	// removed. The messages are Juju's.
	if err := st.EnsureMachineDead(t.Context(), model, f.ctr); err != nil {
		t.Fatal(err)
	}
	other := statetest.AddMachine(t, st, model, "")
	f.markDead(t, other.ID)
	rev := st.Revision()
	_, err = st.CompleteMachineRemovals(t.Context(), model, []string{other.ID, f.ctr})
	if want := "cannot remove machine " + f.ctr + ": not marked for removal"; err == nil || err.Error() != want {
		t.Fatalf("CompleteMachineRemovals of an unmarked machine: %v; want %q", err, want)
	}
	if _, err := st.Machine(t.Context(), model, other.ID); err != nil {
		t.Fatalf("the marked machine went with a refused call: %v", err)
	}
	if _, err := st.CompleteMachineRemovals(t.Context(), model, []string{"0/lxd", "bad id"}); err == nil || err.Error() != "Invalid machine ids: 0/lxd, bad id" {
		t.Fatalf("invalid ids: %v", err)
	}
	if !revisionsAfter(st, rev, 0) {
		t.Errorf("refused calls committed: revision %d -> %d", rev, st.Revision())
	}

	if err := st.MarkMachineForRemoval(t.Context(), model, f.ctr); err != nil {
		t.Fatal(err)
	}
	if got, err := st.MachineRemovals(t.Context(), model); err != nil || !slices.Equal(got, []string{f.ctr, other.ID}) {
		t.Fatalf("MachineRemovals = %v, %v; want %s, %s (id order)", got, err, f.ctr, other.ID)
	}
	all, err := st.AllMachineRemovals(t.Context())
	if err != nil || !slices.Equal(all[model], []string{f.ctr, other.ID}) || len(all) != 1 {
		t.Fatalf("AllMachineRemovals = %v, %v", all, err)
	}

	rev = st.Revision()
	removed, err := st.CompleteMachineRemovals(t.Context(), model, []string{f.ctr, "42", other.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !revisionsAfter(st, rev, 1) {
		t.Errorf("revision %d -> %d; want one commit", rev, st.Revision())
	}
	if len(removed) != 2 || removed[0].ID != f.ctr || removed[1].ID != other.ID {
		t.Fatalf("removed %+v; want %s and %s", removed, f.ctr, other.ID)
	}
	if r := removed[0]; r.HostInstanceID != "inst-h" || len(r.Released) != 1 || r.Released[0].Value != f.addr.Value {
		t.Errorf("container's removal %+v; want host inst-h and address %s released", r, f.addr.Value)
	}
	if r := removed[1]; r.HostInstanceID != "" || len(r.Released) != 0 {
		t.Errorf("machine's removal %+v; want no host and no addresses", r)
	}
	for _, id := range []string{f.ctr, other.ID} {
		if _, err := st.Machine(t.Context(), model, id); !errors.Is(err, errors.NotFound) {
			t.Errorf("machine %s after its removal: %v", id, err)
		}
	}
	addrs, err := st.IPAddresses(t.Context(), model)
	if err != nil || len(addrs) != 0 {
		t.Errorf("addresses after the removal: %+v, %v; want none", addrs, err)
	}
	if vols, err := st.MachineVolumes(t.Context(), model, f.ctr); err != nil || len(vols) != 0 {
		t.Errorf("volumes still attached to %s: %+v, %v", f.ctr, vols, err)
	}
	if f.has(t, f.nestedSeqID) {
		t.Errorf("%s is left", f.nestedSeqID)
	}
	hostAfter, err := st.Machine(t.Context(), model, f.host)
	if err != nil {
		t.Fatal(err)
	}
	if hostAfter.Life != hostBefore.Life || hostAfter.InstanceID != hostBefore.InstanceID {
		t.Errorf("host %+v; was %+v", hostAfter, hostBefore)
	}
	if got, err := st.MachineRemovals(t.Context(), model); err != nil || len(got) != 0 {
		t.Errorf("MachineRemovals after = %v, %v; want none", got, err)
	}
	// The host's next container gets a new number: ids are never reused.
	next, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: f.host, ContainerType: "lxd"})
	if err != nil || next.ID == f.ctr {
		t.Errorf("next container %q (%v); %s was removed", next.ID, err, f.ctr)
	}

	// Again (a second undertaker, a retry): a no-op that commits nothing.
	rev = st.Revision()
	removed, err = st.CompleteMachineRemovals(t.Context(), model, []string{f.ctr, other.ID})
	if err != nil || len(removed) != 0 {
		t.Errorf("second removal: %+v, %v; want nothing, no error", removed, err)
	}
	if !revisionsAfter(st, rev, 0) {
		t.Errorf("second removal committed: revision %d -> %d", rev, st.Revision())
	}
}

// TestConcurrentMachineRemovals: two undertakers completing the same
// removals at once release each address once: one removes each machine,
// the other finds it gone.
func TestConcurrentMachineRemovals(t *testing.T) {
	t.Parallel()
	f := newRemovalFixture(t)
	st, model := f.st, f.model
	f.markDead(t, f.ctr)
	results := make([][]state.MachineRemoval, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	done := make(chan int)
	for i := range 2 {
		go func() {
			<-start
			results[i], errs[i] = st.CompleteMachineRemovals(t.Context(), model, []string{f.ctr})
			done <- i
		}()
	}
	close(start)
	<-done
	<-done
	released := 0
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("undertaker %d: %v", i, errs[i])
		}
		for _, r := range results[i] {
			released += len(r.Released)
		}
	}
	if n := len(results[0]) + len(results[1]); n != 1 || released != 1 {
		t.Errorf("removals %+v: %d machines removed, %d addresses released; want 1 and 1", results, n, released)
	}
}

// TestWatchMachineRemovals fires when a machine is marked for removal and
// when it is removed, as Juju's WatchMachineRemovals; not for other
// changes of the model's machines.
func TestWatchMachineRemovals(t *testing.T) {
	t.Parallel()
	f := newRemovalFixture(t)
	st, model := f.st, f.model
	w, err := st.WatchMachineRemovals(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func(what string, want bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if !want {
			ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
		}
		defer cancel()
		err := w.Next(ctx)
		switch {
		case want && err != nil:
			t.Fatalf("%s: %v; want an event", what, err)
		case !want && err == nil:
			t.Fatalf("%s: an event; want none", what)
		}
	}
	next("nothing yet", false)
	if err := st.EnsureMachineDead(t.Context(), model, f.ctr); err != nil {
		t.Fatal(err)
	}
	next("a machine made dead", false)
	if err := st.MarkMachineForRemoval(t.Context(), model, f.ctr); err != nil {
		t.Fatal(err)
	}
	next("the mark", true)
	if _, err := st.CompleteMachineRemovals(t.Context(), model, []string{f.ctr}); err != nil {
		t.Fatal(err)
	}
	next("the removal", true)
	if _, err := st.WatchMachineRemovals(t.Context(), "no-such-model"); !errors.Is(err, errors.NotFound) {
		t.Errorf("WatchMachineRemovals of no model: %v", err)
	}
}

// TestMachineUndertakerConfig: controller config machine-undertaker takes
// "builtin" or "external" only; unset is builtin.
func TestMachineUndertakerConfig(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	ctrl, err := st.Controller(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !state.BuiltinMachineUndertaker(ctrl.Config) {
		t.Error("unset: not builtin")
	}
	for _, bad := range []any{"both", true, 1} {
		if err := st.UpdateControllerConfig(t.Context(), map[string]any{state.MachineUndertakerKey: bad}, nil); !errors.Is(err, errors.NotValid) {
			t.Errorf("%v: %v; want not valid", bad, err)
		}
	}
	if err := st.UpdateControllerConfig(t.Context(), map[string]any{state.MachineUndertakerKey: state.MachineUndertakerExternal}, nil); err != nil {
		t.Fatal(err)
	}
	if ctrl, _ = st.Controller(t.Context()); state.BuiltinMachineUndertaker(ctrl.Config) {
		t.Error("external: still builtin")
	}
}

// TestTwoStatesRemoveEachMachineOnce: two daemons' States on one etcd
// prefix complete the same removals at once (two undertakers, which the
// election should prevent but the transaction must survive): each machine
// is removed by one of them and each address released once.
func TestTwoStatesRemoveEachMachineOnce(t *testing.T) {
	t.Parallel()
	sts := etcdStates(t, 2)
	model := statetest.DefaultModelUUID
	st := sts[0]
	if _, err := st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.0.0.0/24", AllocatableIPLow: "10.0.0.10", AllocatableIPHigh: "10.0.0.200"}); err != nil {
		t.Fatal(err)
	}
	host := statetest.AddMachine(t, st, model, "h")
	var ids []string
	for i := range 8 {
		c, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: host.ID, ContainerType: "lxd"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/24", c.ID, "eth0", fmt.Sprintf("00:16:3e:00:00:%02x", i), uint64(i)); err != nil {
			t.Fatal(err)
		}
		if err := st.EnsureMachineDead(t.Context(), model, c.ID); err != nil {
			t.Fatal(err)
		}
		if err := st.MarkMachineForRemoval(t.Context(), model, c.ID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	syncStates(t, sts)
	var mu sync.Mutex
	removedBy := map[string]int{}
	released := 0
	race(t, sts, func(st *state.State, g, r int) error {
		// Each goroutine takes the ids from its own starting point.
		order := append(slices.Clone(ids[(g+r)%len(ids):]), ids[:(g+r)%len(ids)]...)
		removed, err := st.CompleteMachineRemovals(t.Context(), model, order)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, m := range removed {
			removedBy[m.ID]++
			released += len(m.Released)
		}
		return nil
	})
	if t.Failed() {
		return
	}
	for _, id := range ids {
		if removedBy[id] != 1 {
			t.Errorf("machine %s removed %d times", id, removedBy[id])
		}
	}
	if released != len(ids) {
		t.Errorf("%d addresses released; want %d", released, len(ids))
	}
	for i, st := range sts {
		if addrs, err := st.IPAddresses(t.Context(), model); err != nil || len(addrs) != 0 {
			t.Errorf("state %d: addresses left %+v, %v", i, addrs, err)
		}
	}
}
