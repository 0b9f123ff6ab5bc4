package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestPartitionedDaemonRefusesOldPassword: daemon a reaches etcd only
// through one follower, daemon b through the two other members. a's member
// is stopped with SIGSTOP, which cuts a off from etcd while b keeps a
// quorum (and its leader: b's writes go on at once), and a machine's
// password is changed through b at once, while a's replica is still
// recent. From the moment b acknowledges the change, a refuses the old
// password (and every other login: it cannot tell what is current) with
// code "try again", instead of trusting its replica; once its member is
// back, a refuses the old password as a wrong one and accepts the new.
// Measured (logged): how long a's refusals took.
func TestPartitionedDaemonRefusesOldPassword(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.NewProcesses(t, bin(t, "etcdcluster"), 3)
	eps := cluster.Endpoints()
	ctx := ctxT(t)
	lctx, cancel := context.WithTimeout(ctx, waitTimeout)
	lead, err := cluster.Leader(lctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	cut := (lead + 1) % len(eps)
	var others []string
	for i, ep := range eps {
		if i != cut {
			others = append(others, ep)
		}
	}
	a := startDaemon(t, "a", eps[cut:cut+1], "/partition/")
	b := startDaemon(t, "b", others, "/partition/")
	creds := a.credentials(t)
	model := creds.DefaultModelUUID

	// Machine 1, provisioned through b, with its first password.
	const nonce, oldPW, newPW = "machine-0:nonce-1", "machine-1-password-old", "machine-1-password-new"
	id := addMachines(t, mustDial(t, creds, b.addr, false, ""), 1)[0]
	m := client.NewProvisioner(mustDial(t, creds, b.addr, true, model)).Machine("machine-" + id)
	if err := m.SetPassword(ctx, oldPW); err != nil {
		t.Fatal(err)
	}
	if err := m.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "i-" + id, Nonce: nonce}); err != nil {
		t.Fatal(err)
	}
	login := func(d *daemonProc, pw string) error {
		c, err := client.Dial(ctx, client.Config{Addr: d.addr, ModelUUID: model, CACert: []byte(creds.CACert), DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err = c.LoginAgent(cctx, "machine-"+id, pw, nonce)
		return err
	}
	if err := login(a, oldPW); err != nil {
		t.Fatalf("the agent's login through a: %v", err)
	}

	if err := cluster.Pause(cut); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	// The change, through b (retried should an election come meanwhile).
	var changed time.Time
	waitFor(t, "the password change through b", func() bool {
		err := m.SetPassword(ctx, newPW)
		if err != nil && !client.IsCode(err, params.CodeTryAgain) {
			t.Fatalf("SetPassword through b: %v", err)
		}
		changed = time.Now()
		return err == nil
	})
	// Every login through a after the change is refused, none accepted:
	// a cannot reach etcd to learn what is current.
	var slowest time.Duration
	for range 3 {
		for _, pw := range []string{oldPW, newPW} {
			start := time.Now()
			err := login(a, pw)
			if !client.IsCode(err, params.CodeTryAgain) {
				t.Fatalf("a login through a, cut off from etcd, %s after the password changed: %v; want code %q",
					time.Since(changed).Round(time.Millisecond), err, params.CodeTryAgain)
			}
			slowest = max(slowest, time.Since(start))
		}
	}
	t.Logf("a cut off from etcd; the password changed through b %s later; a refused every login after with %q, each within %s (request timeout 2s)",
		changed.Sub(paused).Round(time.Millisecond), params.CodeTryAgain, slowest.Round(time.Millisecond))
	if code, body := health(t, creds, a); code != http.StatusServiceUnavailable {
		t.Errorf("/health of a cut off from etcd: %d %q", code, body)
	}

	if err := cluster.Resume(cut); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new password to be accepted through a", func() bool {
		err := login(a, newPW)
		if err != nil && !client.IsCode(err, params.CodeTryAgain) {
			t.Fatalf("the new password through a: %v", err)
		}
		return err == nil
	})
	if err := login(a, oldPW); !client.IsCode(err, params.CodeUnauthorized) {
		t.Errorf("the old password through a after m0 came back: %v; want code %q", err, params.CodeUnauthorized)
	}
}
