package daemon_test

import (
	"net/netip"
	"regexp"
	"slices"
	"testing"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// The provisioning flow as real agents run it: the controller's provisioner
// starts machine 1, machine 1's agent logs in and provisions its container
// 1/lxd/0 with an address from the operator's subnet, and tears it down
// when the operator removes it. The operator's steps go through the
// ModelAdmin facade, as provisionctl sends them.
func TestProvisioningFlowEndToEnd(t *testing.T) {
	d := start(t, nil)
	st, model := d.State(), d.Credentials().DefaultModelUUID
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	operator := loginAdmin(t, d, model)
	op := func(method string, args, result any) {
		t.Helper()
		if err := operator.Call(ctxT(t), "ModelAdmin", 1, "", method, args, result); err != nil {
			t.Fatalf("operator %s: %v", method, err)
		}
	}
	// The operator's network: a space with one subnet in zone-a.
	op("AddSpace", params.AddSpaceArgs{Name: "internal"}, nil)
	op("AddSubnet", params.AddSubnetArgs{CIDR: "192.168.10.0/24", Space: "internal", Zones: []string{"zone-a"},
		ProviderID: "sn-1", AllocatableRange: "192.168.10.100-192.168.10.199"}, nil)
	_, err := st.AddMachine(model, state.MachineParams{Nonce: "existing", InstanceID: "i-existing"})
	must(err)

	// The controller's provisioner watches the model's machines.
	ctrl := loginController(t, d, model)
	wr := mustCall[params.StringsWatchResult](t, ctrl, 11, "WatchModelMachines", nil)
	if !slices.Equal(wr.Changes, []string{"0"}) {
		t.Fatalf("initial machines = %v", wr.Changes)
	}
	machines := client.NewStringsWatcher(ctrl, wr.StringsWatcherId)
	next := pendingStrings(t, machines)

	// The operator adds machine 1.
	var added params.AddMachinesResult
	op("AddMachines", params.AddMachinesArgs{Base: "ubuntu@22.04"}, &added)
	if !slices.Equal(added.Machines, []string{"1"}) {
		t.Fatalf("new machines = %v", added.Machines)
	}
	wantIDs(t, next, "1")

	// The provisioner starts it.
	life := mustCall[params.LifeResults](t, ctrl, 11, "Life", ents("machine-1"))
	if life.Results[0].Life != "alive" {
		t.Fatalf("Life = %+v", life.Results[0])
	}
	pi := mustCall[params.ProvisioningInfoResults](t, ctrl, 11, "ProvisioningInfo", ents("machine-1"))
	if pi.Results[0].Error != nil || pi.Results[0].Result.Base.Name != "ubuntu" || pi.Results[0].Result.Tags["juju-model-uuid"] != model {
		t.Fatalf("ProvisioningInfo = %+v", pi.Results[0])
	}
	const pw1, nonce1 = "machine-1-password-from-provisioner", "machine-0:nonce-1"
	checkItem(t, "SetPasswords", mustCall[params.ErrorResults](t, ctrl, 11, "SetPasswords",
		params.EntityPasswords{Changes: []params.EntityPassword{{Tag: "machine-1", Password: pw1}}}).Results[0].Error, noErr)
	// Before provisioning, the agent cannot log in.
	early := dial(t, d, model)
	_, err = early.LoginAgent(ctxT(t), "machine-1", pw1, nonce1)
	wantErr(t, err, "machine 1 not provisioned", params.CodeNotProvisioned)
	zone := "zone-a"
	checkItem(t, "SetInstanceInfo", mustCall[params.ErrorResults](t, ctrl, 11, "SetInstanceInfo", params.InstancesInfo{
		Machines: []params.InstanceInfo{{Tag: "machine-1", InstanceId: "i-1", Nonce: nonce1,
			Characteristics: &params.HardwareCharacteristics{AvailabilityZone: &zone}}}}).Results[0].Error, noErr)
	checkItem(t, "SetInstanceStatus", mustCall[params.ErrorResults](t, ctrl, 11, "SetInstanceStatus", params.SetStatus{
		Entities: []params.EntityStatusArgs{{Tag: "machine-1", Status: "running"}}}).Results[0].Error, noErr)

	// Machine 1's agent logs in with its password and the nonce.
	bad := dial(t, d, model)
	_, err = bad.LoginAgent(ctxT(t), "machine-1", pw1, "wrong-nonce")
	wantErr(t, err, "machine 1 not provisioned", params.CodeNotProvisioned)
	agent := dial(t, d, model)
	if _, err := agent.LoginAgent(ctxT(t), "machine-1", pw1, nonce1); err != nil {
		t.Fatalf("machine 1 login: %v", err)
	}
	checkItem(t, "SetSupportedContainers", mustCall[params.ErrorResults](t, agent, 11, "SetSupportedContainers",
		params.MachineContainersParams{Params: []params.MachineContainers{{MachineTag: "machine-1", ContainerTypes: []string{"lxd"}}}}).Results[0].Error, noErr)
	cr := mustCall[params.StringsWatchResults](t, agent, 11, "WatchContainers",
		params.WatchContainers{Params: []params.WatchContainer{{MachineTag: "machine-1", ContainerType: "lxd"}}})
	if cr.Results[0].Error != nil || len(cr.Results[0].Changes) != 0 {
		t.Fatalf("WatchContainers = %+v", cr.Results[0])
	}
	containers := client.NewStringsWatcher(agent, cr.Results[0].StringsWatcherId)
	cnext := pendingStrings(t, containers)

	// The operator adds container 1/lxd/0.
	op("AddMachines", params.AddMachinesArgs{Placement: "lxd:1"}, &added)
	if !slices.Equal(added.Machines, []string{"1/lxd/0"}) {
		t.Fatalf("new container = %v", added.Machines)
	}
	wantIDs(t, cnext, "1/lxd/0")
	// The controller's machine watcher does not see containers.
	notYet(t, next)

	// The agent prepares the container's network: a real address.
	const ctag = "machine-1-lxd-0"
	nc := mustCall[params.MachineNetworkConfigResults](t, agent, 11, "PrepareContainerInterfaceInfo", ents(ctag))
	if nc.Results[0].Error != nil || len(nc.Results[0].Config) != 1 {
		t.Fatalf("PrepareContainerInterfaceInfo = %+v", nc.Results[0])
	}
	cfg := nc.Results[0].Config[0]
	addr, err := netip.ParseAddr(cfg.Address)
	lo, hi := netip.MustParseAddr("192.168.10.100"), netip.MustParseAddr("192.168.10.199")
	if err != nil || addr.Less(lo) || hi.Less(addr) || cfg.CIDR != "192.168.10.0/24" || cfg.ConfigType != "static" ||
		cfg.GatewayAddress != "192.168.10.1" || cfg.ProviderSubnetId != "sn-1" {
		t.Fatalf("network config = %+v", cfg)
	}
	if !regexp.MustCompile(`^00:16:3e(:[0-9a-f]{2}){3}$`).MatchString(cfg.MACAddress) {
		t.Errorf("MAC %q", cfg.MACAddress)
	}
	// Asking again gives the same address; the v1 Get reads it back.
	again := mustCall[params.MachineNetworkConfigResults](t, agent, 11, "PrepareContainerInterfaceInfo", ents(ctag))
	if again.Results[0].Config[0].Address != cfg.Address {
		t.Errorf("second Prepare gave %s; want %s", again.Results[0].Config[0].Address, cfg.Address)
	}
	v1get := mustCall[params.V1MachineNetworkConfigResults](t, agent, 1, "GetContainerInterfaceInfo", v1ents(ctag))
	if v1get.Results[0].Error != nil || v1get.Results[0].Config[0].Address != cfg.Address || v1get.Results[0].Config[0].NetworkName != "internal" {
		t.Errorf("v1 GetContainerInterfaceInfo = %+v", v1get.Results[0])
	}

	// It provisions the container.
	cpi := mustCall[params.ProvisioningInfoResults](t, agent, 11, "ProvisioningInfo", ents(ctag))
	if cpi.Results[0].Error != nil {
		t.Fatalf("container ProvisioningInfo: %+v", cpi.Results[0].Error)
	}
	checkItem(t, "container SetPasswords", mustCall[params.ErrorResults](t, agent, 11, "SetPasswords",
		params.EntityPasswords{Changes: []params.EntityPassword{{Tag: ctag, Password: "container-password-1-lxd-0"}}}).Results[0].Error, noErr)
	checkItem(t, "container SetInstanceInfo", mustCall[params.ErrorResults](t, agent, 11, "SetInstanceInfo", params.InstancesInfo{
		Machines: []params.InstanceInfo{{Tag: ctag, InstanceId: "juju-1-lxd-0", Nonce: "machine-1:nonce-c"}}}).Results[0].Error, noErr)
	checkItem(t, "container status", mustCall[params.ErrorResults](t, agent, 11, "SetStatus", params.SetStatus{
		Entities: []params.EntityStatusArgs{{Tag: ctag, Status: "started"}}}).Results[0].Error, noErr)
	// The container's own agent can now log in.
	cagent := dial(t, d, model)
	if _, err := cagent.LoginAgent(ctxT(t), ctag, "container-password-1-lxd-0", "machine-1:nonce-c"); err != nil {
		t.Fatalf("container login: %v", err)
	}
	cagent.Close()

	// The operator removes the container.
	cnext = pendingStrings(t, containers)
	op("RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"1/lxd/0"}}, nil)
	wantIDs(t, cnext, "1/lxd/0")
	life = mustCall[params.LifeResults](t, agent, 11, "Life", ents(ctag))
	if life.Results[0].Life != "dying" {
		t.Fatalf("container life = %+v", life.Results[0])
	}
	cnext = pendingStrings(t, containers)
	checkItem(t, "EnsureDead", mustCall[params.ErrorResults](t, agent, 11, "EnsureDead", ents(ctag)).Results[0].Error, noErr)
	wantIDs(t, cnext, "1/lxd/0")
	cnext = pendingStrings(t, containers)
	checkItem(t, "Remove", mustCall[params.ErrorResults](t, agent, 11, "Remove", ents(ctag)).Results[0].Error, noErr)
	notYet(t, cnext) // death was already reported

	// The address is free again, at the provider too.
	addrs, err := st.IPAddresses(model)
	must(err)
	if len(addrs) != 0 {
		t.Errorf("addresses after removal = %+v", addrs)
	}
	if !slices.Contains(d.Environ().Released(), cfg.Address) {
		t.Errorf("provider released %v; want %s", d.Environ().Released(), cfg.Address)
	}
	life = mustCall[params.LifeResults](t, agent, 11, "Life", ents(ctag))
	checkItem(t, "life after remove", life.Results[0].Error, notFound("1/lxd/0"))
}
