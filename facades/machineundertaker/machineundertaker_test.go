package machineundertaker_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// The machine undertaker's work: a machine marked for removal by its
// provisioner (Juju's worker/provisioner: dead, instance stopped,
// MarkMachinesForRemoval) is removed by the controller with what the
// built-in provider gave it, and the MachineUndertaker facade serves a
// controller agent running Juju's own worker/machineundertaker.

// undertakerWorld is a model with a subnet the built-in provider allocates
// from, a provisioned machine 0 (its agent: host) with a container that
// has an address and a link-layer device, and a provisioned machine 1.
type undertakerWorld struct {
	srv        *provisiondtest.Server
	model      string
	admin      *client.ModelAdmin
	ctrl       *client.Conn        // the controller agent on the model
	prov       *client.Provisioner // the controller agent's Provisioner
	host       *client.Provisioner // machine 0's agent's
	ctr        string              // the container's id
	addr, mac  string              // its address and MAC
	hostBefore params.MachineStatus
}

func newUndertakerWorld(t *testing.T, srv *provisiondtest.Server) *undertakerWorld {
	t.Helper()
	ctx := testkit.Ctx(t)
	w := &undertakerWorld{srv: srv, model: srv.DefaultModel()}
	w.admin = client.NewModelAdmin(srv.Admin(t, w.model))
	w.ctrl = srv.ControllerAgent(t, w.model)
	w.prov = client.NewProvisioner(w.ctrl)
	if _, err := w.admin.AddSpace(ctx, params.AddSpaceArgs{Name: "db"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.admin.AddSubnet(ctx, params.AddSubnetArgs{CIDR: "10.0.0.0/24", Space: "db", Zones: []string{"zone-a"}, ProviderID: "subnet-0",
		AllocatableRange: "10.0.0.10-10.0.0.20"}); err != nil {
		t.Fatal(err)
	}
	w.host = client.NewProvisioner(srv.MachineAgent(t, w.model, "0"))
	srv.ProvisionMachine(t, w.model, "1")
	res, err := w.admin.AddMachines(ctx, params.AddMachinesArgs{Placement: "lxd:0"})
	if err != nil {
		t.Fatal(err)
	}
	w.ctr = res.Machines[0]
	// The host's container provisioner: an address, then the instance
	// with its network config (the link-layer device).
	c := w.host.Machine(client.MachineTag(w.ctr))
	cfg, err := c.PrepareContainerInterfaceInfo(ctx)
	if err != nil || len(cfg) != 1 || cfg[0].Address == "" {
		t.Fatalf("PrepareContainerInterfaceInfo = %+v, %v", cfg, err)
	}
	w.addr, w.mac = cfg[0].Address, cfg[0].MACAddress
	if err := c.SetInstanceInfo(ctx, params.InstanceInfo{InstanceId: "c-0", Nonce: "machine-0:c0",
		NetworkConfig: []params.NetworkConfig{{InterfaceName: "eth0", MACAddress: w.mac, ProviderId: "nic-c0",
			CIDR: "10.0.0.0/24", ConfigType: "static", Address: w.addr}}}); err != nil {
		t.Fatal(err)
	}
	w.hostBefore = w.machine(t, "0")
	return w
}

// status reads the model's status.
func (w *undertakerWorld) status(t *testing.T) params.ModelStatus {
	t.Helper()
	st, err := w.admin.Status(testkit.Ctx(t), params.ModelArgs{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// machine finds machine id in the status (its containers left out); the
// zero value when there is none.
func (w *undertakerWorld) machine(t *testing.T, id string) params.MachineStatus {
	t.Helper()
	var find func(ms []params.MachineStatus) params.MachineStatus
	find = func(ms []params.MachineStatus) params.MachineStatus {
		for _, m := range ms {
			if m.ID == id {
				m.Containers = nil
				return m
			}
			if c := find(m.Containers); c.ID != "" {
				return c
			}
		}
		return params.MachineStatus{}
	}
	return find(w.status(t).Machines)
}

// deadAndMarked does what Juju's provisioners do with a dead machine:
// its agent (here its provisioner) makes it dead, the instance is
// stopped, and the machine is marked for removal.
func deadAndMarked(t *testing.T, p *client.Provisioner, id string) {
	t.Helper()
	m := p.Machine(client.MachineTag(id))
	if err := m.EnsureDead(testkit.Ctx(t)); err != nil {
		t.Fatalf("EnsureDead(%s): %v", id, err)
	}
	if err := m.MarkForRemoval(testkit.Ctx(t)); err != nil {
		t.Fatalf("MarkMachinesForRemoval(%s): %v", id, err)
	}
}

// TestMachineUndertakerRemovesMarkedMachines, on bbolt and on etcd: a
// container and a machine marked for removal are removed within moments:
// the container's address is released (at the built-in provider too), its
// link-layer device goes with it, its host keeps no trace of it; the
// watchers see what Juju's would.
func TestMachineUndertakerRemovesMarkedMachines(t *testing.T) {
	for _, store := range []provisiondtest.Store{provisiondtest.StoreBolt, provisiondtest.StoreEtcd} {
		t.Run(string(store), func(t *testing.T) {
			w := newUndertakerWorld(t, provisiondtest.Start(t, provisiondtest.WithStore(store)))
			ctx := testkit.Ctx(t)
			mu := client.NewMachineUndertaker(w.ctrl)

			machines, err := w.prov.WatchModelMachines(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer machines.Stop()
			if got := provisiondtest.Next(t, machines); !slices.Equal(got, []string{"0", "1"}) {
				t.Fatalf("WatchModelMachines initial %v", got)
			}
			containers, err := w.host.Machine("machine-0").WatchContainers(ctx, "lxd")
			if err != nil {
				t.Fatal(err)
			}
			defer containers.Stop()
			if got := provisiondtest.Next(t, containers); !slices.Equal(got, []string{w.ctr}) {
				t.Fatalf("WatchContainers initial %v", got)
			}
			wres, err := mu.WatchMachineRemovals(ctx, client.Entities(client.ModelTag(w.model)))
			if err != nil {
				t.Fatal(err)
			}
			removals, err := client.NewNotifyWatch(w.ctrl, wres.Results[0])
			if err != nil {
				t.Fatal(err)
			}
			defer removals.Stop()
			provisiondtest.Next(t, removals) // the watch's initial event
			feed, err := w.admin.WatchModel(ctx, params.ModelArgs{})
			if err != nil {
				t.Fatal(err)
			}
			defer feed.Stop()

			deadAndMarked(t, w.host, w.ctr)
			deadAndMarked(t, w.prov, "1")
			testkit.WaitFor(t, "the marked machines removed", func() bool {
				return w.machine(t, w.ctr).ID == "" && w.machine(t, "1").ID == ""
			})

			// The address is free, at the built-in provider too.
			sn, err := w.admin.Subnets(ctx, params.ModelArgs{})
			if err != nil {
				t.Fatal(err)
			}
			if len(sn.Subnets) != 1 || len(sn.Subnets[0].Addresses) != 0 {
				t.Errorf("subnets after the removal: %+v; want no address in use", sn.Subnets)
			}
			if !slices.Contains(testkit.Daemon(w.srv).Environ().Released(), w.addr) {
				t.Errorf("the built-in provider released %v; want %s among them", testkit.Daemon(w.srv).Environ().Released(), w.addr)
			}
			// The link-layer device went with the machine; nothing is
			// left to undertake.
			info, err := mu.GetMachineProviderInterfaceInfo(ctx, client.Entities(client.MachineTag(w.ctr)))
			if err != nil {
				t.Fatal(err)
			}
			if r := info.Results[0]; r.MachineTag != client.MachineTag(w.ctr) || r.Error == nil || r.Error.Code != params.CodeNotFound {
				t.Errorf("GetMachineProviderInterfaceInfo of the removed container: %+v", r)
			}
			all, err := mu.AllMachineRemovals(ctx, client.Entities(client.ModelTag(w.model)))
			if err != nil || all.Results[0].Error != nil || len(all.Results[0].Entities) != 0 {
				t.Errorf("AllMachineRemovals after = %+v, %v", all, err)
			}
			// The host: no container left, otherwise as it was.
			host := w.machine(t, "0")
			if host.Life != w.hostBefore.Life || host.InstanceID != w.hostBefore.InstanceID ||
				!slices.Equal(deref(host.SupportedContainers), deref(w.hostBefore.SupportedContainers)) {
				t.Errorf("host after %+v; before %+v", host, w.hostBefore)
			}
			if st := w.status(t); len(st.Machines) != 1 || len(st.Machines[0].Containers) != 0 {
				t.Errorf("machines after: %+v; want machine 0 alone", st.Machines)
			}

			// The watchers, as Juju's: a lifecycle watcher reports a
			// machine when it dies and forgets it, so its removal is not
			// reported again (state/watcher.go, lifecycleWatcher.merge);
			// the removals watcher fires; the model's feed has the
			// removals.
			if got := provisiondtest.Next(t, machines); !slices.Equal(got, []string{"1"}) {
				t.Errorf("WatchModelMachines: %v; want 1 (its death)", got)
			}
			if got := provisiondtest.Next(t, containers); !slices.Equal(got, []string{w.ctr}) {
				t.Errorf("WatchContainers: %v; want %s (its death)", got, w.ctr)
			}
			provisiondtest.Next(t, removals)
			seen := map[string]bool{}
			want := []string{"machine/" + w.ctr, "machine/1", "ipaddress/" + w.addr}
			for !allSeen(seen, want) {
				for _, id := range provisiondtest.Next(t, feed) {
					seen[id] = true
				}
			}
			provisiondtest.NoNext(t, machines)
			provisiondtest.NoNext(t, containers)

			// The host's next container gets a new number.
			res, err := w.admin.AddMachines(ctx, params.AddMachinesArgs{Placement: "lxd:0"})
			if err != nil || res.Machines[0] == w.ctr {
				t.Errorf("next container %v, %v; %s was removed", res.Machines, err, w.ctr)
			}
		})
	}
}

func allSeen(seen map[string]bool, want []string) bool {
	for _, id := range want {
		if !seen[id] {
			return false
		}
	}
	return true
}

func deref(p *[]string) []string {
	if p == nil {
		return nil
	}
	return *p
}

// TestMachineUndertakerFacade: MachineUndertaker v1 on the wire, for a
// controller agent running Juju's worker/machineundertaker. The expected
// replies are written from Juju's
// apiserver/facades/controller/machineundertaker/undertaker.go (entities
// left nil when there are none; interface infos made with make(); the
// machine tag set on every result; model tags checked against the
// connected model; CompleteMachineRemovals returning only an error) and
// state/machineremovals.go (unknown machines skipped; unmarked ones
// refused), with the JSON keys of Juju's rpc/params (params.go:
// EntitiesResults; network.go: ProviderInterfaceInfoResults). Removals are
// listed in machine id order (Juju's: the removal collection's order).
//
// With controller config machine-undertaker=external the built-in
// undertaker leaves the removals to it, and status shows them marked;
// back to builtin, a sweep removes what was left; and when the built-in
// one gets there first, Juju's worker gets no error.
func TestMachineUndertakerFacade(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	srv := provisiondtest.Start(t, provisiondtest.WithLogLevel(slog.LevelDebug), provisiondtest.WithLogOutput(logs))
	w := newUndertakerWorld(t, srv)
	ctx := testkit.Ctx(t)
	if _, err := w.admin.SetControllerConfig(ctx, params.SetControllerConfigArgs{
		Config: map[string]any{state.MachineUndertakerKey: state.MachineUndertakerExternal}}); err != nil {
		t.Fatal(err)
	}
	// The controller agent's calls, each reply's response as it came.
	raw := testkit.LoginController(t, testkit.Daemon(srv), w.model)
	call := func(method string, args any) (json.RawMessage, error) {
		var resp json.RawMessage
		err := raw.Call(ctx, "MachineUndertaker", 1, "", method, args, &resp)
		return resp, err
	}
	modelTag, otherTag := "model-"+w.model, "model-"+srv.ControllerModel()
	perm := `{"message":"permission denied","code":"unauthorized access"}`
	exchange := func(method string, args any, want string) {
		t.Helper()
		resp, err := call(method, args)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if got := string(resp); got != want {
			t.Errorf("%s:\n got %s\nwant %s", method, got, want)
		}
	}
	refused := func(method string, args any, want string) {
		t.Helper()
		resp, err := call(method, args)
		var pe *params.Error
		if !errors.As(err, &pe) || pe.Message != want || pe.Code != "" {
			t.Errorf("%s: %s, %v; want the error %q without a code", method, resp, err, want)
		}
	}

	exchange("AllMachineRemovals", testkit.Ents(modelTag), `{"results":[{"entities":null}]}`)
	deadAndMarked(t, w.host, w.ctr)
	deadAndMarked(t, w.prov, "1")
	// Left to the external undertaker: the built-in one says so of each
	// mark it sees.
	for _, id := range []string{w.ctr, "1"} {
		testkit.WaitFor(t, "the built-in undertaker to leave machine "+id, func() bool {
			return slices.ContainsFunc(strings.Split(logs.String(), "\n"), func(l string) bool {
				return strings.Contains(l, `msg="machine removal left to an external undertaker"`) && strings.HasSuffix(l, " machine="+id)
			})
		})
	}

	// Status shows them dead and marked (provisionctl's rendering:
	// cmd/provisionctl TestMachinesMarkedForRemoval).
	for _, id := range []string{w.ctr, "1"} {
		if m := w.machine(t, id); m.Life != "dead" || !m.MarkedForRemoval {
			t.Errorf("status of %s: life %q, marked %v; want dead and marked", id, m.Life, m.MarkedForRemoval)
		}
	}

	ctag := client.MachineTag(w.ctr)
	exchange("AllMachineRemovals", testkit.Ents(modelTag, otherTag),
		`{"results":[{"entities":[{"tag":"`+ctag+`"},{"tag":"machine-1"}]},{"entities":null,"error":`+perm+`}]}`)
	exchange("GetMachineProviderInterfaceInfo", testkit.Ents(ctag, "machine-1", "machine-42", "unit-x-0"), `{"results":[`+
		`{"machine-tag":"`+ctag+`","interfaces":[{"interface-name":"eth0","mac-address":"`+w.mac+`","provider-id":"nic-c0"}]},`+
		`{"machine-tag":"machine-1","interfaces":[]},`+
		`{"machine-tag":"machine-42","interfaces":null,"error":{"message":"machine 42 not found","code":"not found"}},`+
		`{"machine-tag":"unit-x-0","interfaces":null,"error":{"message":"\"unit-x-0\" is not a valid machine tag","code":""}}]}`)
	resp, err := call("WatchMachineRemovals", testkit.Ents(modelTag, otherTag))
	if !regexp.MustCompile(`^\{"results":\[\{"NotifyWatcherId":"[0-9]+"\},\{"NotifyWatcherId":"","error":` + regexp.QuoteMeta(perm) + `\}\]\}$`).Match(resp) {
		t.Errorf("WatchMachineRemovals: %s, %v", resp, err)
	}

	// Completing: refused for a machine not marked (nothing removed), and
	// for a tag that is no machine's; then done, and done again.
	refused("CompleteMachineRemovals", testkit.Ents(ctag, "machine-0"), "cannot remove machine 0: not marked for removal")
	refused("CompleteMachineRemovals", testkit.Ents("unit-x-0"), `"unit-x-0" is not a valid machine tag`)
	if m := w.machine(t, w.ctr); m.ID == "" {
		t.Fatal("a refused CompleteMachineRemovals removed the container")
	}
	exchange("CompleteMachineRemovals", testkit.Ents(ctag, "machine-1"), `{}`)
	if w.machine(t, w.ctr).ID != "" || w.machine(t, "1").ID != "" {
		t.Error("CompleteMachineRemovals answered; the machines are still there")
	}
	if !slices.Contains(testkit.Daemon(srv).Environ().Released(), w.addr) {
		t.Errorf("the built-in provider released %v; want %s among them", testkit.Daemon(srv).Environ().Released(), w.addr)
	}
	exchange("CompleteMachineRemovals", testkit.Ents(ctag, "machine-1", "machine-42"), `{}`)
	exchange("AllMachineRemovals", testkit.Ents(modelTag), `{"results":[{"entities":null}]}`)

	// Back to the built-in undertaker: what was left marked meanwhile is
	// swept up.
	srv.ProvisionMachine(t, w.model, "2")
	deadAndMarked(t, w.prov, "2")
	if _, err := w.admin.SetControllerConfig(ctx, params.SetControllerConfigArgs{Unset: []string{state.MachineUndertakerKey}}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "machine 2 removed by the built-in undertaker's sweep", func() bool { return w.machine(t, "2").ID == "" })

	// The built-in one gets there first: Juju's worker, which listed the
	// removal before, reads the interfaces (its client checks the machine
	// tag, not the error: api/controller/machineundertaker) and completes
	// the removal without an error.
	srv.ProvisionMachine(t, w.model, "3")
	deadAndMarked(t, w.prov, "3")
	testkit.WaitFor(t, "machine 3 removed by the built-in undertaker", func() bool { return w.machine(t, "3").ID == "" })
	exchange("GetMachineProviderInterfaceInfo", testkit.Ents("machine-3"),
		`{"results":[{"machine-tag":"machine-3","interfaces":null,"error":{"message":"machine 3 not found","code":"not found"}}]}`)
	exchange("CompleteMachineRemovals", testkit.Ents("machine-3"), `{}`)
	if got := strings.Count(logs.String(), `msg="machine removed"`); got != 2 {
		t.Errorf("the built-in undertaker logged %d removals; want 2 (machines 2 and 3)", got)
	}
}

// TestMachineUndertakerHandsOverOnEtcd: two daemons of one controller on
// etcd; one leads the singular workers. A machine marked through the
// other is removed, by the leader alone; when the leader stops, the other
// takes over and removes the next one. (A leader killed outright hands over
// within its lease: internal/e2e TestMachineUndertakerLeaderKilled.)
func TestMachineUndertakerHandsOverOnEtcd(t *testing.T) {
	cluster := etcdtest.New(t) // not a daemon's own: either may stop
	a := provisiondtest.Start(t, provisiondtest.WithEtcd(cluster.Endpoints(), "/undertaker/"))
	b := provisiondtest.Start(t, provisiondtest.WithEtcd(cluster.Endpoints(), "/undertaker/"))
	testkit.WaitFor(t, "one daemon to lead", func() bool { return testkit.Daemon(a).SingularLeading() != testkit.Daemon(b).SingularLeading() })
	leader, other := a, b
	if testkit.Daemon(b).SingularLeading() {
		leader, other = b, a
	}
	model := a.DefaultModel()
	admin := client.NewModelAdmin(other.Admin(t, model))
	prov := client.NewProvisioner(other.ControllerAgent(t, model))
	removed := func(id string) {
		t.Helper()
		testkit.WaitFor(t, "machine "+id+" removed", func() bool {
			st, err := admin.Status(testkit.Ctx(t), params.ModelArgs{})
			if err != nil {
				t.Fatal(err)
			}
			return !slices.ContainsFunc(st.Machines, func(m params.MachineStatus) bool { return m.ID == id })
		})
	}
	removals := func(s *provisiondtest.Server) int { return strings.Count(s.Log(), `msg="machine removed"`) }

	if res, err := admin.AddMachines(testkit.Ctx(t), params.AddMachinesArgs{Count: 2}); err != nil || !slices.Equal(res.Machines, []string{"0", "1"}) {
		t.Fatalf("AddMachines = %+v, %v", res, err)
	}
	deadAndMarked(t, prov, "0")
	removed("0")
	// The undertaker logs a removal after its transaction commits: a
	// status read may see the machine gone a moment before the line.
	testkit.WaitFor(t, "the leader to log the removal", func() bool { return removals(leader) >= 1 })
	if l, o := removals(leader), removals(other); l != 1 || o != 0 {
		t.Errorf("removals logged: leader %d, other %d; want 1 and 0", l, o)
	}

	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the other daemon to lead", testkit.Daemon(other).SingularLeading)
	deadAndMarked(t, prov, "1")
	removed("1")
	testkit.WaitFor(t, "the new leader to log the removal", func() bool { return removals(other) >= 1 })
	if o := removals(other); o != 1 {
		t.Errorf("removals logged by the new leader: %d; want 1", o)
	}
}
