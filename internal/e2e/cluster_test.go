package e2e

import (
	"slices"
	"sync"
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

// TestBuiltDaemonsStartingAtOnce: three built daemons started at the same
// moment on an empty prefix make one controller (under the store's
// compare, the losers join the winner's): one identity, one controller
// model and one default model, and each lists the three.
func TestBuiltDaemonsStartingAtOnce(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.New(t)
	var ds []*daemonProc
	for _, name := range []string{"a", "b", "c"} {
		ds = append(ds, spawnDaemon(t, name, cluster.Endpoints(), "/race/"))
	}
	errs := make([]error, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() { errs[i] = d.waitServing() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	creds := ds[0].credentials(t)
	made := 0
	for _, d := range ds {
		c := d.credentials(t)
		if c.ControllerUUID != creds.ControllerUUID || c.AdminPassword != creds.AdminPassword ||
			c.CACert != creds.CACert || c.ControllerAgent != creds.ControllerAgent {
			t.Fatalf("daemon %s made controller %s; daemon a %s", d.name, c.ControllerUUID, creds.ControllerUUID)
		}
		if d.logged("initialised the controller in the store") {
			made++
		}
	}
	if made != 1 {
		t.Errorf("%d daemons say they initialised the controller; want 1", made)
	}
	all := addrsOf(ds...)
	for _, d := range ds {
		conn := mustDial(t, creds, d.addr, false, "")
		models, err := client.NewModelAdmin(conn).ListModels(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(models.Models) != 2 {
			t.Errorf("models through %s: %+v; want the controller model and default", d.name, models.Models)
		}
		waitFor(t, "login at "+d.name+" listing the three daemons", func() bool {
			c, err := dial(t.Context(), creds, d.addr, false, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			return slices.Equal(sorted(hostPorts(c.LoginResult().Servers)), all)
		})
	}
}
