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
// A machine marked for removal is removed once, by the daemon leading
// (provisiond_machine_removals_total). The leader is killed with SIGKILL:
// the survivor leads once the dead one's lease has expired and removes the
// next machine marked through it. Measured (logged): each mark to its
// removal; the kill to the survivor leading.
func TestMachineUndertakerLeaderKilled(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	a := startDaemon(t, "a", cluster.Endpoints(), "/undertaker/")
	b := startDaemon(t, "b", cluster.Endpoints(), "/undertaker/")
	creds := a.credentials(t)
	leading := func(d *daemonProc) bool { return metric(t, creds, d, "provisiond_singular_leading") == 1 }
	removals := func(d *daemonProc) float64 { return metric(t, creds, d, "provisiond_machine_removals_total") }
	// leader waits for one daemon to lead alone, and returns it and the
	// other. Leadership may move meanwhile (on a busy box a leader's
	// lease keepalive can miss its TTL, and the other daemon takes over,
	// as it must): who leads is read again where it matters.
	leader := func() (leader, other *daemonProc) {
		t.Helper()
		waitFor(t, "one daemon to lead", func() bool { return leading(a) != leading(b) })
		if leading(b) {
			return b, a
		}
		return a, b
	}
	leader()
	model := creds.DefaultModelUUID
	// Clients dial the daemon named: the test kills whichever leads.
	admin := func(d *daemonProc) *client.Conn { return mustDial(t, creds, d.addr, false, "") }
	ids := addMachines(t, admin(b), 2)

	removeThrough := func(d *daemonProc, id string) time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		defer cancel()
		m := client.NewProvisioner(mustDial(t, creds, d.addr, true, model)).Machine(client.MachineTag(id))
		if err := m.EnsureDead(ctx); err != nil {
			t.Fatal(err)
		}
		marked := time.Now()
		if err := m.MarkForRemoval(ctx); err != nil {
			t.Fatal(err)
		}
		c := admin(d)
		waitFor(t, "machine "+id+" removed", func() bool { return !hasMachine(t, c, id) })
		return time.Since(marked)
	}

	took := removeThrough(b, ids[0])
	// Removed once, by the daemon leading (the removal's transaction
	// checks that it is still due: a second leader finds nothing to do).
	// The remover counts it after its commit, which other daemons may see
	// first.
	waitFor(t, "the removal counted", func() bool { return removals(a)+removals(b) >= 1 })
	if ra, rb := removals(a), removals(b); ra+rb != 1 {
		t.Errorf("removals: a %v, b %v; want 1 in all", ra, rb)
	}
	t.Logf("machine %s removed %s after its mark (removals: a %v, b %v)", ids[0], took.Round(time.Millisecond), removals(a), removals(b))

	killed, survivor := leader()
	before := removals(survivor)
	killed.kill(t)
	at := time.Now()
	waitFor(t, survivor.name+" to lead after "+killed.name+" was killed", func() bool { return leading(survivor) })
	handover := time.Since(at)
	took = removeThrough(survivor, ids[1])
	waitFor(t, "the removal counted by "+survivor.name, func() bool { return removals(survivor) >= before+1 })
	if s := removals(survivor); s != before+1 {
		t.Errorf("removals by %s after the handover: %v; want %v", survivor.name, s, before+1)
	}
	t.Logf("%s killed: %s leads after %s (lease TTL %s); machine %s removed %s after its mark",
		killed.name, survivor.name, handover.Round(time.Millisecond), leaseTTL, ids[1], took.Round(time.Millisecond))
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
