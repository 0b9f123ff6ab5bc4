package provisioner_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Address allocation is persistent and never hands one address to two
// containers, also under concurrent calls from several connections; an
// exhausted range is reported per container; an address the provider
// refuses is marked unavailable and another one tried.
func TestProvisionerAddressAllocation(t *testing.T) {
	f := testkit.NewProvFixture(t)
	st, model := f.St, f.Model
	// 11 allocatable addresses (.10-.20): the fixture's 0/lxd/0 plus 11
	// new containers of machine 0 make one too many.
	tags := []string{"machine-0-lxd-0"}
	for range 11 {
		c, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: "0", ContainerType: "lxd"})
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, state.Machine{ID: c.ID}.Tag().String())
	}
	// The provider refuses .15 once.
	refused := make(chan string, 1)
	f.D.Environ().SetAllocateHook(func(_, _, addr, _, _ string) error {
		if addr == "10.0.0.15" {
			select {
			case refused <- addr:
				return errors.New("address in use at the provider")
			default:
			}
		}
		return nil
	})
	defer f.D.Environ().SetAllocateHook(nil)

	conns := []*client.Conn{f.Agent}
	for range 3 {
		c := testkit.Dial(t, f.D, model)
		if _, err := c.LoginAgent(testkit.Ctx(t), "machine-0", testkit.M0Password, testkit.M0Nonce); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	results := make([]params.MachineNetworkConfigResult, len(tags))
	var wg sync.WaitGroup
	for i, tag := range tags {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := testkit.Call[params.MachineNetworkConfigResults](t, conns[i%len(conns)], 11, "PrepareContainerInterfaceInfo", testkit.Ents(tag))
			if err != nil {
				t.Errorf("%s: %v", tag, err)
				return
			}
			results[i] = res.Results[0]
		}()
	}
	wg.Wait()
	seen := map[string]string{}
	exhausted := 0
	for i, r := range results {
		if r.Error != nil {
			if !strings.HasSuffix(r.Error.Message, `allocatable IP addresses exhausted for subnet "10.0.0.0/24"`) ||
				!strings.HasPrefix(r.Error.Message, "failed to allocate an address for ") {
				t.Errorf("%s: %v", tags[i], r.Error)
			}
			exhausted++
			continue
		}
		a := r.Config[0].Address
		if other, dup := seen[a]; dup {
			t.Errorf("address %s given to %s and %s", a, other, tags[i])
		}
		seen[a] = tags[i]
		if a == "10.0.0.15" {
			t.Errorf("refused address handed out to %s", tags[i])
		}
	}
	// .15 was refused, so 10 addresses for 12 containers.
	if len(seen) != 10 || exhausted != 2 {
		t.Errorf("%d allocated, %d exhausted; want 10 and 2", len(seen), exhausted)
	}
	addrs, _ := st.IPAddresses(t.Context(), model)
	states := map[string]int{}
	for _, a := range addrs {
		states[a.State]++
	}
	if states[state.AddressStateAllocated] != 10 || states[state.AddressStateUnavailable] != 1 {
		t.Errorf("address states = %v", states)
	}

	// Releasing a container's addresses frees them for others.
	var victim string
	for _, tag := range seen {
		victim = tag
		break
	}
	rel := testkit.MustCall[params.ErrorResults](t, f.Agent, 11, "ReleaseContainerAddresses", testkit.Ents(victim, "machine-0", "machine-1-lxd-0"))
	checkItem(t, "release", rel.Results[0].Error, noErr)
	checkItem(t, "host", rel.Results[1].Error, itemErr{`cannot mark addresses for removal for "machine-0": not a container`, ""})
	checkItem(t, "other", rel.Results[2].Error, permErr)
	for i, r := range results {
		if r.Error != nil {
			res := testkit.MustCall[params.MachineNetworkConfigResults](t, f.Agent, 11, "PrepareContainerInterfaceInfo", testkit.Ents(tags[i]))
			checkItem(t, "after release", res.Results[0].Error, noErr)
			break
		}
	}
}

// The container networking methods' call-level checks and the 2015
// variants.
func TestProvisionerContainerNetworkingChecks(t *testing.T) {
	f := testkit.NewProvFixture(t)
	st, model := f.St, f.Model
	// A provisioned host in a zone without subnets, and an unprovisioned one.
	zone := "zone-b"
	h, err := st.AddMachine(t.Context(), model, state.MachineParams{Password: "host-password-zone-b-long"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetInstanceInfo(t.Context(), model, h.ID, state.InstanceInfo{InstanceID: "i-h", Nonce: "nh",
		Hardware: &state.HardwareCharacteristics{AvailabilityZone: &zone}}); err != nil {
		t.Fatal(err)
	}
	hc, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: h.ID, ContainerType: "lxd"})
	if err != nil {
		t.Fatal(err)
	}
	hostConn := testkit.Dial(t, f.D, model)
	if _, err := hostConn.LoginAgent(testkit.Ctx(t), "machine-"+h.ID, "host-password-zone-b-long", "nh"); err != nil {
		t.Fatal(err)
	}
	ctag := state.Machine{ID: hc.ID}.Tag().String()

	// v11 without an allocatable subnet: DHCP.
	res := testkit.MustCall[params.MachineNetworkConfigResults](t, hostConn, 11, "PrepareContainerInterfaceInfo", testkit.Ents(ctag))
	if res.Results[0].Error != nil || res.Results[0].Config[0].ConfigType != "dhcp" || res.Results[0].Config[0].Address != "" {
		t.Errorf("v11 without subnets = %+v", res.Results[0])
	}
	// 2015: a call-level error.
	err = hostConn.Call(testkit.Ctx(t), "Provisioner", 1, "", "PrepareContainerInterfaceInfo", testkit.V1Ents(ctag), nil)
	testkit.WantErr(t, err, "cannot allocate addresses: no interfaces available", "")

	// The 2015 Prepare refuses a provisioned container; v11 Get does.
	if err := st.SetInstanceInfo(t.Context(), model, "0/lxd/0", state.InstanceInfo{InstanceID: "juju-c", Nonce: "nc"}); err != nil {
		t.Fatal(err)
	}
	v1 := testkit.MustCall[params.V1MachineNetworkConfigResults](t, f.Agent, 1, "PrepareContainerInterfaceInfo", testkit.V1Ents("machine-0-lxd-0", "machine-0", "unit-x-0"))
	checkV1Item(t, "provisioned", v1.Results[0].Error, itemErr{`container "0/lxd/0" already provisioned as "juju-c"`, ""})
	checkV1Item(t, "host", v1.Results[1].Error, itemErr{`cannot allocate address for "machine-0": not a container`, ""})
	checkV1Item(t, "unit", v1.Results[2].Error, itemErr{`"unit-x-0" is not a valid machine tag`, ""})
	get := testkit.MustCall[params.MachineNetworkConfigResults](t, f.Agent, 11, "GetContainerInterfaceInfo", testkit.Ents("machine-0-lxd-0"))
	checkItem(t, "v11 get provisioned", get.Results[0].Error, itemErr{`container "0/lxd/0" already provisioned as "juju-c"`, ""})
	v1get := testkit.MustCall[params.V1MachineNetworkConfigResults](t, f.Agent, 1, "GetContainerInterfaceInfo", testkit.V1Ents("machine-0-lxd-0"))
	checkV1Item(t, "v1 get without address", v1get.Results[0].Error, itemErr{`expected 1 address for container "0/lxd/0", got 0`, ""})

	// 2015 ContainerManagerConfig: ip-forwarding, as a subnet allows
	// allocation.
	v1cfg := testkit.MustCall[params.V1ContainerManagerConfig](t, f.Agent, 1, "ContainerManagerConfig", params.V1ContainerManagerConfigParams{Type: "lxc"})
	if v1cfg.ManagerConfig["name"] != "juju" || v1cfg.ManagerConfig["ip-forwarding"] != "true" {
		t.Errorf("v1 ContainerManagerConfig = %v", v1cfg.ManagerConfig)
	}
	// A provider that refuses every address burns a bounded number.
	f.D.Environ().SetAllocateHook(func(_, _, _, _, _ string) error { return errors.New("no") })
	defer f.D.Environ().SetAllocateHook(nil)
	nc, err := st.AddMachine(t.Context(), model, state.MachineParams{ParentID: "0", ContainerType: "lxd"})
	if err != nil {
		t.Fatal(err)
	}
	ref := testkit.MustCall[params.MachineNetworkConfigResults](t, f.Agent, 11, "PrepareContainerInterfaceInfo", testkit.Ents(state.Machine{ID: nc.ID}.Tag().String()))
	checkItem(t, "refused", ref.Results[0].Error, itemErr{`failed to allocate an address for "` + nc.ID + `": the provider refused 8 addresses: no`, ""})
	addrs, _ := st.IPAddresses(t.Context(), model)
	unavailable := 0
	for _, a := range addrs {
		if a.State == state.AddressStateUnavailable {
			unavailable++
		}
	}
	if unavailable != 8 {
		t.Errorf("%d addresses marked unavailable; want 8", unavailable)
	}

	// The controller agent has no host in this model.
	err = f.Ctrl.Call(testkit.Ctx(t), "Provisioner", 11, "", "PrepareContainerInterfaceInfo", testkit.Ents("machine-0-lxd-0"), nil)
	testkit.WantErr(t, err, "permission denied", params.CodeUnauthorized)
}
