package state_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

const model = statetest.DefaultModelUUID

func addMachine(t *testing.T, st *state.State, p state.MachineParams) state.Machine {
	t.Helper()
	m, err := st.AddMachine(t.Context(), model, p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestContainers(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := addMachine(t, st, state.MachineParams{})
	c0 := addMachine(t, st, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
	c1 := addMachine(t, st, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
	k0 := addMachine(t, st, state.MachineParams{ParentID: m.ID, ContainerType: "kvm"})
	g := addMachine(t, st, state.MachineParams{ParentID: c0.ID, ContainerType: "lxd"})
	for got, want := range map[string]string{c0.ID: "0/lxd/0", c1.ID: "0/lxd/1", k0.ID: "0/kvm/0", g.ID: "0/lxd/0/lxd/0"} {
		if got != want {
			t.Errorf("container id %q; want %q", got, want)
		}
	}
	if !c0.IsContainer() || c0.ContainerType() != "lxd" || state.ParentID(g.ID) != c0.ID || m.IsContainer() {
		t.Errorf("container helpers wrong: %+v", c0)
	}
	cs, err := st.Containers(t.Context(), model, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, []string{"0/kvm/0", "0/lxd/0", "0/lxd/1"}) {
		t.Errorf("Containers = %v", ids)
	}
	for _, tc := range []struct {
		name string
		p    state.MachineParams
		want errors.ConstError
	}{
		{"unknown type", state.MachineParams{ParentID: m.ID, ContainerType: "docker"}, errors.NotValid},
		{"type without parent", state.MachineParams{ContainerType: "lxd"}, errors.NotValid},
		{"missing parent", state.MachineParams{ParentID: "9", ContainerType: "lxd"}, errors.NotFound},
		{"nonce without instance", state.MachineParams{Nonce: "n"}, errors.NotValid},
		{"zero volume", state.MachineParams{Volumes: []state.VolumeParams{{Pool: "x"}}}, errors.NotValid},
	} {
		if _, err := st.AddMachine(t.Context(), model, tc.p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v; want %v", tc.name, err, tc.want)
		}
	}
	must(t, st.SetMachineDying(t.Context(), model, m.ID))
	if _, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"}); !errors.Is(err, errors.NotValid) {
		t.Errorf("container on a dying machine: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestMachineLifeCycle(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := addMachine(t, st, state.MachineParams{})
	c := addMachine(t, st, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
	if _, err := st.RemoveMachine(t.Context(), model, m.ID); err == nil || err.Error() != "cannot remove machine 0: machine is not dead" {
		t.Errorf("remove alive: %v", err)
	}
	err := st.EnsureMachineDead(t.Context(), model, m.ID)
	if !errors.Is(err, state.ErrHasContainers) || err.Error() != `machine 0 is hosting containers "0/lxd/0"` {
		t.Errorf("EnsureDead with a container: %v", err)
	}
	must(t, st.EnsureMachineDead(t.Context(), model, c.ID))
	must(t, st.EnsureMachineDead(t.Context(), model, c.ID)) // idempotent
	must(t, st.SetMachineDying(t.Context(), model, c.ID))   // never backwards
	if got, _ := st.Machine(t.Context(), model, c.ID); got.Life != state.Dead {
		t.Errorf("life went backwards: %s", got.Life)
	}
	_, err = st.RemoveMachine(t.Context(), model, c.ID)
	must(t, err)
	if _, err := st.Machine(t.Context(), model, c.ID); !errors.Is(err, errors.NotFound) {
		t.Errorf("removed container: %v", err)
	}
	// Units keep a machine alive.
	_, err = st.AddApplication(t.Context(), model, state.ApplicationParams{Name: "mysql"})
	must(t, err)
	u, err := st.AddUnit(t.Context(), model, "mysql", m.ID, "")
	must(t, err)
	if u.Name != "mysql/0" || u.MachineID != m.ID {
		t.Errorf("unit = %+v", u)
	}
	err = st.EnsureMachineDead(t.Context(), model, m.ID)
	if !errors.Is(err, state.ErrHasAssignedUnits) || err.Error() != `machine 0 has unit "mysql/0" assigned` {
		t.Errorf("EnsureDead with a unit: %v", err)
	}
	must(t, st.RemoveUnit(t.Context(), model, u.Name))
	must(t, st.EnsureMachineDead(t.Context(), model, m.ID))
	_, err = st.RemoveMachine(t.Context(), model, m.ID)
	must(t, err)
	// The controller machine never dies.
	if err := st.EnsureMachineDead(t.Context(), statetest.ControllerModelUUID, "0"); err == nil {
		t.Error("controller machine died")
	}
}

func TestSetInstanceInfo(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := addMachine(t, st, state.MachineParams{Volumes: []state.VolumeParams{{Pool: "loop", Size: 5}}})
	zone := "z"
	must(t, st.SetInstanceInfo(t.Context(), model, m.ID, state.InstanceInfo{InstanceID: "i", Nonce: "n",
		Hardware: &state.HardwareCharacteristics{AvailabilityZone: &zone},
		Volumes:  map[string]state.VolumeInfo{"0": {VolumeID: "v"}}}))
	defer func() {
		// Removing the machine detaches its volumes; the volumes stay.
		must(t, st.EnsureMachineDead(t.Context(), model, m.ID))
		_, err := st.RemoveMachine(t.Context(), model, m.ID)
		must(t, err)
		if vols, _ := st.MachineVolumes(t.Context(), model, m.ID); len(vols) != 0 {
			t.Errorf("volumes still attached to a removed machine: %+v", vols)
		}
	}()
	err := st.SetInstanceInfo(t.Context(), model, m.ID, state.InstanceInfo{InstanceID: "j", Nonce: "n"})
	if !errors.Is(err, errors.AlreadyExists) || err.Error() != `cannot set instance data for machine "0": already set` {
		t.Errorf("second set: %v", err)
	}
	if err := st.SetInstanceInfo(t.Context(), model, m.ID, state.InstanceInfo{}); !errors.Is(err, errors.NotValid) {
		t.Errorf("empty: %v", err)
	}
	got, _ := st.Machine(t.Context(), model, m.ID)
	if got.InstanceID != "i" || got.Nonce != "n" || *got.Hardware.AvailabilityZone != "z" {
		t.Errorf("machine = %+v", got)
	}
	// A machine that is not alive cannot be provisioned; a failed write
	// changes nothing.
	d := addMachine(t, st, state.MachineParams{})
	must(t, st.SetMachineDying(t.Context(), model, d.ID))
	rev := st.Revision()
	err = st.SetInstanceInfo(t.Context(), model, d.ID, state.InstanceInfo{InstanceID: "i", Nonce: "n", Volumes: map[string]state.VolumeInfo{"7": {VolumeID: "x"}}})
	if !errors.Is(err, errors.NotFound) {
		t.Errorf("dying: %v", err)
	}
	if st.Revision() != rev {
		t.Errorf("failed write spent a revision")
	}
}

func TestMachineStatuses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := statetest.NewWithOptions(t, statetest.Options{Now: func() time.Time { return now }})
	m := addMachine(t, st, state.MachineParams{})
	for _, tc := range []struct {
		kind state.StatusKind
		s    state.Status
		err  string
	}{
		{state.AgentStatus, state.Status{Status: "started"}, ""},
		{state.AgentStatus, state.Status{Status: "error"}, `cannot set status "error" without info`},
		{state.AgentStatus, state.Status{Status: "down"}, `cannot set status "down"`},
		{state.AgentStatus, state.Status{Status: "nope"}, `cannot set invalid status "nope"`},
		{state.InstanceStatus, state.Status{Status: "running"}, ""},
		{state.InstanceStatus, state.Status{Status: "started"}, `cannot set invalid status "started"`},
		{state.ModificationStatus, state.Status{Status: "applied"}, ""},
	} {
		err := st.SetMachineStatus(t.Context(), model, m.ID, tc.kind, tc.s)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%s %q: %v; want %q", tc.kind, tc.s.Status, err, tc.err)
		}
	}
	got, _ := st.Machine(t.Context(), model, m.ID)
	if got.Status.Status != "started" || !got.Status.Since.Equal(now) || got.Status.Data == nil ||
		got.InstanceStatus.Status != "running" || got.ModificationStatus.Status != "applied" {
		t.Errorf("statuses = %+v %+v %+v", got.Status, got.InstanceStatus, got.ModificationStatus)
	}
	// 2015 UpdateStatus: data only in an error state.
	if err := st.UpdateMachineStatusData(t.Context(), model, m.ID, map[string]any{"a": 1}); err == nil {
		t.Error("UpdateMachineStatusData outside error state")
	}
	must(t, st.SetMachineStatus(t.Context(), model, m.ID, state.AgentStatus, state.Status{Status: "error", Message: "m", Data: map[string]any{"x": 1}}))
	must(t, st.UpdateMachineStatusData(t.Context(), model, m.ID, map[string]any{"transient": true}))
	got, _ = st.Machine(t.Context(), model, m.ID)
	if got.Status.Data["x"] != 1.0 || got.Status.Data["transient"] != true {
		t.Errorf("merged data = %v", got.Status.Data)
	}
}

func TestSupportedContainers(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := addMachine(t, st, state.MachineParams{})
	k := addMachine(t, st, state.MachineParams{ParentID: m.ID, ContainerType: "kvm"})
	l := addMachine(t, st, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
	if err := st.SetSupportedContainers(t.Context(), model, m.ID, []string{"lxd", "bogus"}); !errors.Is(err, errors.NotValid) {
		t.Errorf("bogus type: %v", err)
	}
	must(t, st.SetSupportedContainers(t.Context(), model, m.ID, []string{"lxd"}))
	got, _ := st.Machine(t.Context(), model, m.ID)
	if !slices.Equal(got.SupportedContainers, []string{"lxd"}) || !got.SupportedContainersKnown {
		t.Errorf("machine = %+v", got)
	}
	kg, _ := st.Machine(t.Context(), model, k.ID)
	lg, _ := st.Machine(t.Context(), model, l.ID)
	if kg.Status.Status != "error" || kg.Status.Message != "unsupported container" || lg.Status.Status != "pending" {
		t.Errorf("kvm %+v lxd %+v", kg.Status, lg.Status)
	}
}

func TestSubnetsAndAddressAllocation(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	_, err := st.AddSpace(t.Context(), model, "db", "")
	must(t, err)
	if _, err := st.AddSpace(t.Context(), model, "db", ""); !errors.Is(err, errors.AlreadyExists) {
		t.Errorf("space twice: %v", err)
	}
	for _, bad := range []state.Subnet{
		{CIDR: "10.0.0.1/24"},
		{CIDR: "10.0.0.0/24", AllocatableIPLow: "10.0.1.1", AllocatableIPHigh: "10.0.1.5"},
		{CIDR: "10.0.0.0/24", SpaceName: "nope"},
		{CIDR: "10.0.0.0/24", Gateway: "192.168.0.1"},
	} {
		if _, err := st.AddSubnet(t.Context(), model, bad); err == nil {
			t.Errorf("AddSubnet(%+v) succeeded", bad)
		}
	}
	_, err = st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.0.0.0/29", SpaceName: "db", AllocatableIPLow: "10.0.0.1", AllocatableIPHigh: "10.0.0.6"})
	must(t, err)
	_, err = st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.9.0.0/24"})
	must(t, err)
	host := addMachine(t, st, state.MachineParams{})
	// .1 is the gateway: .2-.6 are free: five containers, concurrently.
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	errs := 0
	for i := range 7 {
		c := addMachine(t, st, state.MachineParams{ParentID: host.ID, ContainerType: "lxd"})
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/29", c.ID, "eth0", "00:16:3e:00:00:0"+fmt.Sprint(i), uint64(i*3))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if err.Error() != `allocatable IP addresses exhausted for subnet "10.0.0.0/29"` {
					t.Errorf("allocate: %v", err)
				}
				errs++
				return
			}
			if prev, dup := got[a.Value]; dup {
				t.Errorf("%s given to %s and %s", a.Value, prev, c.ID)
			}
			got[a.Value] = c.ID
		}()
	}
	wg.Wait()
	if len(got) != 5 || errs != 2 {
		t.Errorf("allocated %v, %d errors", got, errs)
	}
	if _, ok := got["10.0.0.1"]; ok {
		t.Error("gateway allocated")
	}
	if _, err := st.AllocateAddress(t.Context(), model, "10.9.0.0/24", host.ID, "", "", 0); !errors.Is(err, errors.NotSupported) {
		t.Errorf("subnet without range: %v", err)
	}
	// Unavailable addresses stay out of use; released ones come back.
	var one, oneMachine string
	for a, m := range got {
		one, oneMachine = a, m
		break
	}
	must(t, st.SetAddressUnavailable(t.Context(), model, one))
	rel, err := st.ReleaseMachineAddresses(t.Context(), model, oneMachine)
	must(t, err)
	if len(rel) != 0 {
		t.Errorf("released an unavailable address: %v", rel)
	}
	var other, otherMachine string
	for a, m := range got {
		if a != one {
			other, otherMachine = a, m
			break
		}
	}
	rel, err = st.ReleaseMachineAddresses(t.Context(), model, otherMachine)
	must(t, err)
	if len(rel) != 1 || rel[0].Value != other {
		t.Errorf("released %v; want %s", rel, other)
	}
	a, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/29", host.ID, "eth0", "m", 0)
	must(t, err)
	if a.Value != other {
		t.Errorf("re-allocated %s; want the released %s", a.Value, other)
	}
}

func TestAgentBinariesAndPools(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	if err := st.AddAgentBinaries(t.Context(), state.AgentBinary{Version: "nope", SHA256: "x", Size: 1}); !errors.Is(err, errors.NotValid) {
		t.Errorf("bad version: %v", err)
	}
	must(t, st.AddAgentBinaries(t.Context(), state.AgentBinary{Version: "3.3.1-ubuntu-arm64", SHA256: "a", Size: 2},
		state.AgentBinary{Version: "3.3.0-ubuntu-amd64", SHA256: "b", Size: 3}))
	bins, err := st.AgentBinaries(t.Context())
	must(t, err)
	if len(bins) != 2 || bins[0].Version.String() != "3.3.0-ubuntu-amd64" {
		t.Errorf("catalog = %+v", bins)
	}
	must(t, st.AddStoragePool(t.Context(), model, "fast", "builtin", map[string]any{"iops": 100}))
	if err := st.AddStoragePool(t.Context(), model, "fast", "builtin", nil); !errors.Is(err, errors.AlreadyExists) {
		t.Errorf("pool twice: %v", err)
	}
	p, err := st.StoragePool(t.Context(), model, "fast")
	must(t, err)
	if p.Provider != "builtin" || p.Attrs["iops"] != 100.0 {
		t.Errorf("pool = %+v", p)
	}
	if _, err := st.StoragePool(t.Context(), model, "slow"); !errors.Is(err, errors.NotFound) {
		t.Errorf("missing pool: %v", err)
	}
}

func TestMachineLifecycleWatchers(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := addMachine(t, st, state.MachineParams{})
	c := addMachine(t, st, state.MachineParams{ParentID: m.ID, ContainerType: "lxd"})
	w, initial, err := st.WatchModelMachines(t.Context(), model)
	must(t, err)
	defer w.Stop()
	if !slices.Equal(initial, []string{"0"}) {
		t.Errorf("initial = %v", initial)
	}
	cw, cinitial, err := st.WatchContainers(t.Context(), model, m.ID, "lxd")
	must(t, err)
	defer cw.Stop()
	if !slices.Equal(cinitial, []string{c.ID}) {
		t.Errorf("container initial = %v", cinitial)
	}
	if _, _, err := st.WatchContainers(t.Context(), model, "9", ""); !errors.Is(err, errors.NotFound) {
		t.Errorf("watch containers of a missing machine: %v", err)
	}
	m2 := addMachine(t, st, state.MachineParams{})
	watchertest.StringsAssertChange(t, w, m2.ID)
	watchertest.StringsAssertNoChange(t, cw)
	must(t, st.SetMachineStatus(t.Context(), model, m2.ID, state.AgentStatus, state.Status{Status: "started"}))
	watchertest.StringsAssertNoChange(t, w)
	must(t, st.EnsureMachineDead(t.Context(), model, c.ID))
	watchertest.StringsAssertChange(t, cw, c.ID)
	_, err = st.RemoveMachine(t.Context(), model, c.ID)
	must(t, err)
	watchertest.StringsAssertNoChange(t, cw)
	watchertest.StringsAssertNoChange(t, w)

	clock := watchertest.NewFakeClock(time.Now())
	sw, sinitial, err := st.WatchModelMachineStartTimes(t.Context(), model, clock, time.Second)
	must(t, err)
	if !slices.Equal(sinitial, []string{"0", "1"}) {
		t.Errorf("start times initial = %v", sinitial)
	}
	must(t, st.SetMachineAgentStarted(t.Context(), model, "0", ""))
	must(t, st.SetMachineAgentStarted(t.Context(), model, "1", ""))
	watchertest.StringsAssertNoChange(t, sw)
	clock.Advance(time.Second)
	watchertest.StringsAssertChange(t, sw, "0", "1")
	must(t, st.SetMachineAgentStarted(t.Context(), model, "0", ""))
	must(t, sw.Stop())
	if clock.Pending() != 0 {
		t.Errorf("timer left after stop")
	}
	hw, err := st.WatchAPIHostPorts(t.Context())
	must(t, err)
	defer hw.Stop()
	must(t, st.SetAPIHostPorts(t.Context(), [][]state.HostPort{{{Value: "10.0.0.1", Port: 17070}}}))
	watchertest.NotifyAssertChange(t, hw)
}

// Allocations survive a restart: a reopened state never hands out an
// address recorded before.
func TestAddressAllocationPersists(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() *state.State {
		st, err := statetest.OpenBolt(path, state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	if _, err := st.Initialize(t.Context(), statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	_, err := st.AddSubnet(t.Context(), model, state.Subnet{CIDR: "10.0.0.0/30", AllocatableIPLow: "10.0.0.2", AllocatableIPHigh: "10.0.0.3"})
	must(t, err)
	host := addMachine(t, st, state.MachineParams{})
	c0 := addMachine(t, st, state.MachineParams{ParentID: host.ID, ContainerType: "lxd"})
	c1 := addMachine(t, st, state.MachineParams{ParentID: host.ID, ContainerType: "lxd"})
	a0, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/30", c0.ID, "eth0", "m0", 0)
	must(t, err)
	must(t, st.Close())

	st = open()
	defer st.Close()
	a1, err := st.AllocateAddress(t.Context(), model, "10.0.0.0/30", c1.ID, "eth0", "m1", 0)
	must(t, err)
	if a1.Value == a0.Value {
		t.Errorf("address %s handed out twice across a restart", a0.Value)
	}
	addrs, err := st.MachineAddresses(t.Context(), model, c0.ID)
	must(t, err)
	if len(addrs) != 1 || addrs[0].Value != a0.Value || addrs[0].MACAddress != "m0" || addrs[0].State != state.AddressStateAllocated {
		t.Errorf("after restart: %+v", addrs)
	}
}

func TestControllerMachines(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	addMachine(t, st, state.MachineParams{Jobs: []string{state.JobManageModel}}) // a hosted model's: not a controller
	ms, err := st.ControllerMachines(t.Context())
	must(t, err)
	if len(ms) != 1 || ms[0].ID != "0" || ms[0].Model != statetest.ControllerModelUUID {
		t.Errorf("ControllerMachines = %+v", ms)
	}
}

// MachineHost reads what adding a container checks of its host, as the
// machine's record has it.
func TestMachineHost(t *testing.T) {
	t.Parallel()
	st := statetest.New(t)
	m := addMachine(t, st, state.MachineParams{})
	h, err := st.MachineHost(t.Context(), model, m.ID)
	must(t, err)
	if h.Life != state.Alive || h.SupportedContainersKnown || len(h.SupportedContainers) != 0 {
		t.Errorf("new machine's host view %+v", h)
	}
	must(t, st.SetSupportedContainers(t.Context(), model, m.ID, []string{"lxd"}))
	if _, err := st.DestroyMachines(t.Context(), model, []string{m.ID}, false); err != nil {
		t.Fatal(err)
	}
	full, err := st.Machine(t.Context(), model, m.ID)
	must(t, err)
	h, err = st.MachineHost(t.Context(), model, m.ID)
	must(t, err)
	if h.Life != full.Life || h.Life == state.Alive || !h.SupportedContainersKnown || !slices.Equal(h.SupportedContainers, []string{"lxd"}) {
		t.Errorf("host view %+v of machine %+v", h, full)
	}
	if _, err := st.MachineHost(t.Context(), model, "99"); !errors.Is(err, errors.NotFound) {
		t.Errorf("no such machine: %v", err)
	}
	if _, err := st.MachineHost(t.Context(), model, "x/y"); !errors.Is(err, errors.NotValid) {
		t.Errorf("bad id: %v", err)
	}
}
