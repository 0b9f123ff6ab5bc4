package provisioner_test

import (
	"errors"
	"net/netip"
	"regexp"
	"slices"
	"testing"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// The provisioning flow as real agents run it: the controller's provisioner
// starts machine 1, machine 1's agent logs in and provisions its container
// 1/lxd/0 with an address from the operator's subnet, and tears it down
// when the operator removes it. Every step goes through the typed clients
// as the agents and provisionctl send them.
func TestProvisioningFlowEndToEnd(t *testing.T) {
	srv := provisiondtest.Start(t)
	d, ctx, model := testkit.Daemon(srv), testkit.Ctx(t), srv.DefaultModel()
	op := client.NewModelAdmin(srv.Admin(t, model))

	// The operator's network: a space with one subnet in zone-a.
	testkit.Got(op.AddSpace(ctx, params.AddSpaceArgs{Name: "internal"})).OK(t)
	testkit.Got(op.AddSubnet(ctx, params.AddSubnetArgs{CIDR: "192.168.10.0/24", Space: "internal", Zones: []string{"zone-a"},
		ProviderID: "sn-1", AllocatableRange: "192.168.10.100-192.168.10.199"})).OK(t)
	testkit.Got(d.State().AddMachine(t.Context(), model, state.MachineParams{Nonce: "existing", InstanceID: "i-existing"})).OK(t)

	// The controller's provisioner watches the model's machines.
	p := client.NewProvisioner(srv.ControllerAgent(t, model))
	machines := testkit.Got(p.WatchModelMachines(ctx)).OK(t)
	defer machines.Stop()
	if got := provisiondtest.Next(t, machines); !slices.Equal(got, []string{"0"}) {
		t.Fatalf("initial machines = %v", got)
	}

	// The operator adds machine 1.
	if added := testkit.Got(op.AddMachines(ctx, params.AddMachinesArgs{Base: "ubuntu@22.04"})).OK(t); !slices.Equal(added.Machines, []string{"1"}) {
		t.Fatalf("new machines = %v", added.Machines)
	}
	if got := provisiondtest.Next(t, machines); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("machines = %v", got)
	}

	// The provisioner starts it.
	m1 := p.Machine("machine-1")
	if life := testkit.Got(m1.Life(ctx)).OK(t); life != "alive" {
		t.Fatalf("Life = %q", life)
	}
	if pi := testkit.Got(m1.ProvisioningInfo(ctx)).OK(t); pi.Base.Name != "ubuntu" || pi.Tags["juju-model-uuid"] != model {
		t.Fatalf("ProvisioningInfo = %+v", pi)
	}
	const pw1, nonce1 = "machine-1-password-from-provisioner", "machine-0:nonce-1"
	testkit.Must(t, m1.SetPassword(ctx, pw1))
	// Before provisioning, the agent cannot log in.
	_, err := srv.Dial(t, model).LoginAgent(ctx, "machine-1", pw1, nonce1)
	testkit.WantErr(t, err, "machine 1 not provisioned", params.CodeNotProvisioned)
	zone := "zone-a"
	testkit.Must(t, m1.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "i-1", Nonce: nonce1,
		Characteristics: &params.HardwareCharacteristics{AvailabilityZone: &zone}}))
	testkit.Must(t, m1.SetInstanceStatus(ctx, "running", "", nil))

	// Machine 1's agent logs in with its password and the nonce.
	_, err = srv.Dial(t, model).LoginAgent(ctx, "machine-1", pw1, "wrong-nonce")
	testkit.WantErr(t, err, "machine 1 not provisioned", params.CodeNotProvisioned)
	agent := srv.Dial(t, model)
	testkit.Got(agent.LoginAgent(ctx, "machine-1", pw1, nonce1)).OK(t)
	ap := client.NewProvisioner(agent)
	self := ap.Machine("machine-1")
	testkit.Must(t, self.SetSupportedContainers(ctx, "lxd"))
	containers := testkit.Got(self.WatchContainers(ctx, "lxd")).OK(t)
	defer containers.Stop()
	if got := provisiondtest.Next(t, containers); len(got) != 0 {
		t.Fatalf("initial containers = %v", got)
	}

	// The operator adds container 1/lxd/0.
	if added := testkit.Got(op.AddMachines(ctx, params.AddMachinesArgs{Placement: "lxd:1"})).OK(t); !slices.Equal(added.Machines, []string{"1/lxd/0"}) {
		t.Fatalf("new container = %v", added.Machines)
	}
	if got := provisiondtest.Next(t, containers); !slices.Equal(got, []string{"1/lxd/0"}) {
		t.Fatalf("containers = %v", got)
	}
	// The controller's machine watcher does not see containers.
	provisiondtest.NoNext(t, machines)

	// The agent prepares the container's network: a real address.
	const ctag = "machine-1-lxd-0"
	ct := ap.Machine(ctag)
	nc := testkit.Got(ct.PrepareContainerInterfaceInfo(ctx)).OK(t)
	if len(nc) != 1 {
		t.Fatalf("PrepareContainerInterfaceInfo = %+v", nc)
	}
	cfg := nc[0]
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
	if again := testkit.Got(ct.PrepareContainerInterfaceInfo(ctx)).OK(t); again[0].Address != cfg.Address {
		t.Errorf("second Prepare gave %s; want %s", again[0].Address, cfg.Address)
	}
	v1get := testkit.MustCall[params.V1MachineNetworkConfigResults](t, agent, 1, "GetContainerInterfaceInfo", testkit.V1Ents(ctag))
	if v1get.Results[0].Error != nil || v1get.Results[0].Config[0].Address != cfg.Address || v1get.Results[0].Config[0].NetworkName != "internal" {
		t.Errorf("v1 GetContainerInterfaceInfo = %+v", v1get.Results[0])
	}

	// It provisions the container, whose own agent can then log in.
	testkit.Got(ct.ProvisioningInfo(ctx)).OK(t)
	testkit.Must(t, ct.SetPassword(ctx, "container-password-1-lxd-0"))
	testkit.Must(t, ct.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "juju-1-lxd-0", Nonce: "machine-1:nonce-c"}))
	testkit.Must(t, ct.SetStatus(ctx, "started", "", nil))
	testkit.Got(srv.Dial(t, model).LoginAgent(ctx, ctag, "container-password-1-lxd-0", "machine-1:nonce-c")).OK(t)

	// The operator removes the container: it dies, then goes.
	testkit.Got(op.RemoveMachines(ctx, params.RemoveMachinesArgs{Machines: []string{"1/lxd/0"}})).OK(t)
	if got := provisiondtest.Next(t, containers); !slices.Equal(got, []string{"1/lxd/0"}) {
		t.Fatalf("containers after removal = %v", got)
	}
	if life := testkit.Got(ct.Life(ctx)).OK(t); life != "dying" {
		t.Fatalf("container life = %q", life)
	}
	testkit.Must(t, ct.EnsureDead(ctx))
	if got := provisiondtest.Next(t, containers); !slices.Equal(got, []string{"1/lxd/0"}) {
		t.Fatalf("containers after EnsureDead = %v", got)
	}
	testkit.Must(t, ct.Remove(ctx))
	provisiondtest.NoNext(t, containers) // death was already reported

	// The address is free again, at the provider too.
	if addrs := testkit.Got(d.State().IPAddresses(t.Context(), model)).OK(t); len(addrs) != 0 {
		t.Errorf("addresses after removal = %+v", addrs)
	}
	if !slices.Contains(d.Environ().Released(), cfg.Address) {
		t.Errorf("provider released %v; want %s", d.Environ().Released(), cfg.Address)
	}
	_, err = ct.Life(ctx)
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("life after remove: %v", err)
	}
	testkit.WantErr(t, err, "machine 1/lxd/0 not found", params.CodeNotFound)
}
