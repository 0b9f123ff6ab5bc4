package e2e

import (
	"slices"
	"testing"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/rpc/client"
)

// TestBuiltDaemonsOneController: two, then three built daemons on one
// etcd are one controller: they share its identity, list each other at
// login and in credentials.yaml, and a machine added through any of them
// reaches an agent watching on each of the others.
func TestBuiltDaemonsOneController(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	eps := cluster.Endpoints()
	a := startDaemon(t, "a", eps, "/one/")
	b := startDaemon(t, "b", eps, "/one/")
	creds := a.credentials(t)
	cb := b.credentials(t)
	if cb.ControllerUUID != creds.ControllerUUID || cb.CACert != creds.CACert ||
		cb.AdminPassword != creds.AdminPassword || cb.ControllerAgent != creds.ControllerAgent ||
		cb.DefaultModelUUID != creds.DefaultModelUUID {
		t.Fatalf("b is another controller: %s, a %s", cb.ControllerUUID, creds.ControllerUUID)
	}
	model := creds.DefaultModelUUID

	// An agent watching on a sees a machine added through b, and the
	// other way round.
	watchers := map[*daemonProc]*seen{}
	watch := func(d *daemonProc) {
		t.Helper()
		c := mustDial(t, creds, d.addr, true, model)
		w, err := client.NewProvisioner(c).WatchModelMachines(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop() })
		s := &seen{}
		go s.follow(w)
		watchers[d] = s
	}
	watch(a)
	watch(b)
	var added []string
	sees := func(what string, ids []string, ds ...*daemonProc) {
		t.Helper()
		for _, d := range ds {
			waitFor(t, what+" on "+d.name, func() bool { return len(watchers[d].missing(ids)) == 0 })
		}
	}
	ids := addMachines(t, mustDial(t, creds, b.addr, false, ""), 1)
	added = append(added, ids...)
	sees("machine added through b", ids, a)
	ids = addMachines(t, mustDial(t, creds, a.addr, false, ""), 1)
	added = append(added, ids...)
	sees("machine added through a", ids, b)

	// A third joins: it knows the machines at once, every daemon lists
	// the three, and changes through it reach the others' agents.
	c := startDaemon(t, "c", eps, "/one/")
	if cc := c.credentials(t); cc.ControllerUUID != creds.ControllerUUID {
		t.Fatalf("c is another controller: %s", cc.ControllerUUID)
	}
	watch(c)
	sees("machines added before c started", added, c)
	all := addrsOf(a, b, c)
	for _, d := range []*daemonProc{a, b, c} {
		waitFor(t, "login at "+d.name+" listing the three daemons", func() bool {
			conn, err := dial(t.Context(), creds, d.addr, true, model)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			servers := hostPorts(conn.LoginResult().Servers)
			if servers[0] != d.addr {
				t.Fatalf("login at %s lists %v: want itself first", d.addr, servers)
			}
			return slices.Equal(sorted(servers), all)
		})
		waitFor(t, d.name+"'s credentials.yaml listing the three daemons", func() bool {
			cr, err := credentials.Read(d.dataDir + "/" + credentials.File)
			return err == nil && slices.Equal(sorted(cr.APIAddresses), all)
		})
	}
	ids = addMachines(t, mustDial(t, creds, c.addr, false, ""), 2)
	sees("machines added through c", ids, a, b, c)
	ids = addMachines(t, mustDial(t, creds, a.addr, false, ""), 1)
	sees("machine added through a", ids, b, c)

	// Stopped cleanly, a daemon leaves the list at once.
	c.stop(t)
	waitFor(t, "login at a listing a and b", func() bool {
		conn, err := dial(t.Context(), creds, a.addr, true, model)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return slices.Equal(sorted(hostPorts(conn.LoginResult().Servers)), addrsOf(a, b))
	})
}
