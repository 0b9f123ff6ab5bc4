package e2e

import (
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestDaemonKilledAgentsGoDown: two daemons on one etcd; a machine agent
// and the controller agent (the default model's provisioner agent) are
// logged in at a, and b's status shows them alive (a publishes its agents
// under its lease). a is killed with SIGKILL: once its lease expires
// (leaseTTL), b's status shows machine 0 as Juju's status shows a machine
// whose agent is not connected (apiserver/common/machinestatus.go: agent
// status "down", "agent is not communicating with the server"), since
// about then, and the provisioner agent down. Measured (logged): kill to
// down at b.
func TestDaemonKilledAgentsGoDown(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	eps := cluster.Endpoints()
	a := startDaemon(t, "a", eps, "/presence/")
	b := startDaemon(t, "b", eps, "/presence/")
	creds := a.credentials(t)
	model := creds.DefaultModelUUID
	ctx := ctxT(t)

	// Machine 0, provisioned as Juju's provisioner does it, by the
	// controller agent at a; its agent logs in at a.
	id := addMachines(t, mustDial(t, creds, a.addr, false, ""), 1)[0]
	m := client.NewProvisioner(mustDial(t, creds, a.addr, true, model)).Machine(client.MachineTag(id))
	const password, nonce = "machine-agent-password-for-e2e", "machine-0:e2e"
	if err := m.SetPassword(ctx, password); err != nil {
		t.Fatal(err)
	}
	if err := m.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "i-0", Nonce: nonce}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetStatus(ctx, "started", "", nil); err != nil {
		t.Fatal(err)
	}
	agent, err := client.Dial(ctx, client.Config{Addr: a.addr, ModelUUID: model, CACert: []byte(creds.CACert), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	if _, err := agent.LoginAgent(ctx, client.MachineTag(id), password, nonce); err != nil {
		t.Fatal(err)
	}

	admin := client.NewModelAdmin(mustDial(t, creds, b.addr, false, ""))
	status := func() (params.MachineStatus, *params.AgentPresence) {
		t.Helper()
		st, err := admin.Status(ctx, params.ModelArgs{Model: model})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.Machines {
			if m.ID == id {
				return m, st.ProvisionerAgent
			}
		}
		t.Fatalf("machine %s not in b's status", id)
		return params.MachineStatus{}, nil
	}
	alive := func(p *params.AgentPresence) bool { return p != nil && p.Status == "alive" }
	waitFor(t, "machine 0's agent and the provisioner agent alive at b", func() bool {
		m, prov := status()
		return alive(m.AgentPresence) && alive(prov) && m.AgentStatus.Status == "started"
	})

	a.kill(t)
	killed := time.Now()
	waitFor(t, "machine 0 down at b", func() bool {
		m, _ := status()
		return m.AgentStatus.Status == "down"
	})
	t.Logf("machine 0 down at b %s after a was killed (lease TTL %s)", time.Since(killed).Round(time.Millisecond), leaseTTL)
	got, prov := status()
	if got.AgentStatus.Message != "agent is not communicating with the server" || got.AgentPresence == nil || got.AgentPresence.Status != "down" {
		t.Errorf("machine 0 at b: %+v, presence %+v", got.AgentStatus, got.AgentPresence)
	}
	if since, err := time.Parse(time.RFC3339, got.AgentStatus.Since); err != nil || since.Before(killed.Truncate(time.Second)) || since.After(time.Now()) {
		t.Errorf("machine 0 down since %q (%v), want after the kill (%s)", got.AgentStatus.Since, err, killed.Format(time.RFC3339))
	}
	if prov == nil || prov.Status != "down" {
		t.Errorf("provisioner agent at b after a was killed: %+v", prov)
	}
}
