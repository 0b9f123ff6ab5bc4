package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestMachineUndertakerLeaderKilled: two built daemons on one etcd; one
// leads the controller's singular workers (provisiond_singular_leading).
// A machine marked for removal through the other is removed by the leader
// (provisiond_machine_removals_total). The leader is killed with SIGKILL:
// the survivor leads once the dead one's lease has expired and removes the
// next machine marked. Measured (logged): each mark to its removal; the
// kill to the survivor leading.
func TestMachineUndertakerLeaderKilled(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	a := startDaemon(t, "a", cluster.Endpoints(), "/undertaker/")
	b := startDaemon(t, "b", cluster.Endpoints(), "/undertaker/")
	creds := a.credentials(t)
	leading := func(d *daemonProc) bool { return metric(t, creds, d, "provisiond_singular_leading") == 1 }
	waitFor(t, "one daemon to lead", func() bool { return leading(a) != leading(b) })
	leader, survivor := a, b
	if leading(b) {
		leader, survivor = b, a
	}
	model := creds.DefaultModelUUID
	admin := mustDial(t, creds, survivor.addr, false, "")
	prov := client.NewProvisioner(mustDial(t, creds, survivor.addr, true, model))
	ids := addMachines(t, admin, 2)

	removeThrough := func(id string) time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		m := prov.Machine(client.MachineTag(id))
		if err := m.EnsureDead(ctx); err != nil {
			t.Fatal(err)
		}
		marked := time.Now()
		if err := m.MarkForRemoval(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "machine "+id+" removed", func() bool { return !hasMachine(t, admin, id) })
		return time.Since(marked)
	}

	took := removeThrough(ids[0])
	if l, s := metric(t, creds, leader, "provisiond_machine_removals_total"), metric(t, creds, survivor, "provisiond_machine_removals_total"); l != 1 || s != 0 {
		t.Errorf("removals: leader %s %v, %s %v; want 1 and 0", leader.name, l, survivor.name, s)
	}
	t.Logf("machine %s removed by %s %s after its mark", ids[0], leader.name, took.Round(time.Millisecond))

	leader.kill(t)
	killed := time.Now()
	waitFor(t, survivor.name+" to lead after "+leader.name+" was killed", func() bool { return leading(survivor) })
	handover := time.Since(killed)
	took = removeThrough(ids[1])
	if s := metric(t, creds, survivor, "provisiond_machine_removals_total"); s != 1 {
		t.Errorf("removals by %s after the handover: %v; want 1", survivor.name, s)
	}
	t.Logf("%s killed: %s leads after %s (lease TTL %s); machine %s removed %s after its mark",
		leader.name, survivor.name, handover.Round(time.Millisecond), leaseTTL, ids[1], took.Round(time.Millisecond))
}

// hasMachine reports whether the default model has top-level machine id,
// as c (the admin) reads its status.
func hasMachine(t *testing.T, c *client.Conn, id string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	st, err := client.NewModelAdmin(c).Status(ctx, params.ModelArgs{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(st.Machines, func(m params.MachineStatus) bool { return m.ID == id })
}
