package agent_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// A provisioner as Juju's: it watches the model's machines as the
// controller agent, starts the new one, and the machine's agent logs in.
func TestProvisionerStartsNewMachines(t *testing.T) {
	srv := provisiondtest.Start(t) // a real daemon on 127.0.0.1, stopped at cleanup
	ctx := t.Context()
	model := srv.DefaultModel()

	p := client.NewProvisioner(srv.ControllerAgent(t, model))
	machines, err := p.WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer machines.Stop()
	if ids := provisiondtest.Next(t, machines); len(ids) != 0 {
		t.Fatalf("machines at start: %v", ids)
	}

	// An operator adds a machine (what `provisionctl add-machine` calls).
	operator := client.NewModelAdmin(srv.Admin(t, model))
	added, err := operator.AddMachines(ctx, params.AddMachinesArgs{Base: "ubuntu@22.04"})
	if err != nil {
		t.Fatal(err)
	}
	if ids := provisiondtest.Next(t, machines); !slices.Equal(ids, added.Machines) {
		t.Fatalf("watcher reported %v; want %v", ids, added.Machines)
	}

	// The provisioner starts it: password, instance and nonce.
	m := p.Machine(client.MachineTag(added.Machines[0]))
	info, err := m.ProvisioningInfo(ctx)
	if err != nil || info.Base.Name != "ubuntu" {
		t.Fatalf("ProvisioningInfo = %+v, %v", info, err)
	}
	const password, nonce = "machine-0-password-of-enough-length", "machine-0:nonce"
	if err := m.SetPassword(ctx, password); err != nil {
		t.Fatal(err)
	}
	if err := m.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "i-0", Nonce: nonce}); err != nil {
		t.Fatal(err)
	}

	// The machine's agent logs in with them.
	agent := srv.Dial(t, model)
	if _, err := agent.LoginAgent(ctx, m.Tag(), password, nonce); err != nil {
		t.Fatal(err)
	}
	if id, err := client.NewProvisioner(agent).Machine(m.Tag()).InstanceId(ctx); err != nil || id != "i-0" {
		t.Fatalf("InstanceId = %q, %v", id, err)
	}

	// Errors carry Juju's codes, per item of a bulk call too.
	res, err := p.Life(ctx, client.Entities(m.Tag(), "machine-42"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Life != "alive" || !errors.Is(res.Results[1].Error, client.ErrNotFound) {
		t.Fatalf("Life = %+v", res.Results)
	}
}

// A machine agent made ready by the kit watches its own containers.
func TestMachineAgentSeesItsContainers(t *testing.T) {
	srv := provisiondtest.Start(t)
	ctx := t.Context()
	model := srv.DefaultModel()

	// Machine 0 is added, given a password and a nonce by the controller
	// agent, and its agent is logged in.
	m := client.NewProvisioner(srv.MachineAgent(t, model, "0")).Machine("machine-0")
	if err := m.SetSupportedContainers(ctx, "lxd"); err != nil {
		t.Fatal(err)
	}
	containers, err := m.WatchContainers(ctx, "lxd")
	if err != nil {
		t.Fatal(err)
	}
	defer containers.Stop()
	provisiondtest.Next(t, containers) // none yet

	srv.ProvisionMachine(t, model, "0/lxd/0") // provisioned by machine 0's agent
	if ids := provisiondtest.Next(t, containers); !slices.Equal(ids, []string{"0/lxd/0"}) {
		t.Fatalf("containers = %v", ids)
	}
}

// The unit provisioner of a Kubernetes model reports pods for the scale.
func TestUnitProvisionerReportsPods(t *testing.T) {
	srv := provisiondtest.Start(t)
	ctx := t.Context()
	k8s := srv.CAASModel(t, "k8s", provisiondtest.CAASApp{Name: "web", Scale: 2})

	app := client.NewCAASUnitProvisioner(srv.ControllerAgent(t, k8s)).Application("web")
	scale, err := app.Scale(ctx)
	if err != nil || scale != 2 {
		t.Fatalf("Scale = %d, %v", scale, err)
	}
	info, err := app.UpdateUnits(ctx, params.UpdateApplicationUnits{Units: []params.ApplicationUnitParams{
		{ProviderId: "web-0", Address: "10.1.0.1", Status: "running"},
		{ProviderId: "web-1", Address: "10.1.0.2", Status: "running"},
	}})
	if err != nil || len(info.Units) != 2 {
		t.Fatalf("UpdateUnits = %+v, %v", info, err)
	}
}
