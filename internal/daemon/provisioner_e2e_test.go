package daemon_test

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

// got holds what a typed client call returned: got(c.M(ctx, args)).ok(t)
// is its value, failing the test on its error.
func got[T any](v T, err error) returned[T] { return returned[T]{v, err} }

type returned[T any] struct {
	v   T
	err error
}

func (r returned[T]) ok(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The provisioning flow as real agents run it: the controller's provisioner
// starts machine 1, machine 1's agent logs in and provisions its container
// 1/lxd/0 with an address from the operator's subnet, and tears it down
// when the operator removes it. Every step goes through the typed clients
// as the agents and provisionctl send them.
func TestProvisioningFlowEndToEnd(t *testing.T) {
	srv := provisiondtest.Start(t)
	d, ctx, model := testkit.Daemon(srv), ctxT(t), srv.DefaultModel()
	op := client.NewModelAdmin(srv.Admin(t, model))

	// The operator's network: a space with one subnet in zone-a.
	got(op.AddSpace(ctx, params.AddSpaceArgs{Name: "internal"})).ok(t)
	got(op.AddSubnet(ctx, params.AddSubnetArgs{CIDR: "192.168.10.0/24", Space: "internal", Zones: []string{"zone-a"},
		ProviderID: "sn-1", AllocatableRange: "192.168.10.100-192.168.10.199"})).ok(t)
	got(d.State().AddMachine(t.Context(), model, state.MachineParams{Nonce: "existing", InstanceID: "i-existing"})).ok(t)

	// The controller's provisioner watches the model's machines.
	p := client.NewProvisioner(srv.ControllerAgent(t, model))
	machines := got(p.WatchModelMachines(ctx)).ok(t)
	defer machines.Stop()
	if got := provisiondtest.Next(t, machines); !slices.Equal(got, []string{"0"}) {
		t.Fatalf("initial machines = %v", got)
	}

	// The operator adds machine 1.
	if added := got(op.AddMachines(ctx, params.AddMachinesArgs{Base: "ubuntu@22.04"})).ok(t); !slices.Equal(added.Machines, []string{"1"}) {
		t.Fatalf("new machines = %v", added.Machines)
	}
	if got := provisiondtest.Next(t, machines); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("machines = %v", got)
	}

	// The provisioner starts it.
	m1 := p.Machine("machine-1")
	if life := got(m1.Life(ctx)).ok(t); life != "alive" {
		t.Fatalf("Life = %q", life)
	}
	if pi := got(m1.ProvisioningInfo(ctx)).ok(t); pi.Base.Name != "ubuntu" || pi.Tags["juju-model-uuid"] != model {
		t.Fatalf("ProvisioningInfo = %+v", pi)
	}
	const pw1, nonce1 = "machine-1-password-from-provisioner", "machine-0:nonce-1"
	must(t, m1.SetPassword(ctx, pw1))
	// Before provisioning, the agent cannot log in.
	_, err := srv.Dial(t, model).LoginAgent(ctx, "machine-1", pw1, nonce1)
	wantErr(t, err, "machine 1 not provisioned", params.CodeNotProvisioned)
	zone := "zone-a"
	must(t, m1.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "i-1", Nonce: nonce1,
		Characteristics: &params.HardwareCharacteristics{AvailabilityZone: &zone}}))
	must(t, m1.SetInstanceStatus(ctx, "running", "", nil))

	// Machine 1's agent logs in with its password and the nonce.
	_, err = srv.Dial(t, model).LoginAgent(ctx, "machine-1", pw1, "wrong-nonce")
	wantErr(t, err, "machine 1 not provisioned", params.CodeNotProvisioned)
	agent := srv.Dial(t, model)
	got(agent.LoginAgent(ctx, "machine-1", pw1, nonce1)).ok(t)
	ap := client.NewProvisioner(agent)
	self := ap.Machine("machine-1")
	must(t, self.SetSupportedContainers(ctx, "lxd"))
	containers := got(self.WatchContainers(ctx, "lxd")).ok(t)
	defer containers.Stop()
	if got := provisiondtest.Next(t, containers); len(got) != 0 {
		t.Fatalf("initial containers = %v", got)
	}

	// The operator adds container 1/lxd/0.
	if added := got(op.AddMachines(ctx, params.AddMachinesArgs{Placement: "lxd:1"})).ok(t); !slices.Equal(added.Machines, []string{"1/lxd/0"}) {
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
	nc := got(ct.PrepareContainerInterfaceInfo(ctx)).ok(t)
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
	if again := got(ct.PrepareContainerInterfaceInfo(ctx)).ok(t); again[0].Address != cfg.Address {
		t.Errorf("second Prepare gave %s; want %s", again[0].Address, cfg.Address)
	}
	v1get := mustCall[params.V1MachineNetworkConfigResults](t, agent, 1, "GetContainerInterfaceInfo", v1ents(ctag))
	if v1get.Results[0].Error != nil || v1get.Results[0].Config[0].Address != cfg.Address || v1get.Results[0].Config[0].NetworkName != "internal" {
		t.Errorf("v1 GetContainerInterfaceInfo = %+v", v1get.Results[0])
	}

	// It provisions the container, whose own agent can then log in.
	got(ct.ProvisioningInfo(ctx)).ok(t)
	must(t, ct.SetPassword(ctx, "container-password-1-lxd-0"))
	must(t, ct.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "juju-1-lxd-0", Nonce: "machine-1:nonce-c"}))
	must(t, ct.SetStatus(ctx, "started", "", nil))
	got(srv.Dial(t, model).LoginAgent(ctx, ctag, "container-password-1-lxd-0", "machine-1:nonce-c")).ok(t)

	// The operator removes the container: it dies, then goes.
	got(op.RemoveMachines(ctx, params.RemoveMachinesArgs{Machines: []string{"1/lxd/0"}})).ok(t)
	if got := provisiondtest.Next(t, containers); !slices.Equal(got, []string{"1/lxd/0"}) {
		t.Fatalf("containers after removal = %v", got)
	}
	if life := got(ct.Life(ctx)).ok(t); life != "dying" {
		t.Fatalf("container life = %q", life)
	}
	must(t, ct.EnsureDead(ctx))
	if got := provisiondtest.Next(t, containers); !slices.Equal(got, []string{"1/lxd/0"}) {
		t.Fatalf("containers after EnsureDead = %v", got)
	}
	must(t, ct.Remove(ctx))
	provisiondtest.NoNext(t, containers) // death was already reported

	// The address is free again, at the provider too.
	if addrs := got(d.State().IPAddresses(t.Context(), model)).ok(t); len(addrs) != 0 {
		t.Errorf("addresses after removal = %+v", addrs)
	}
	if !slices.Contains(d.Environ().Released(), cfg.Address) {
		t.Errorf("provider released %v; want %s", d.Environ().Released(), cfg.Address)
	}
	_, err = ct.Life(ctx)
	if !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("life after remove: %v", err)
	}
	wantErr(t, err, "machine 1/lxd/0 not found", params.CodeNotFound)
}
