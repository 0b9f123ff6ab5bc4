package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// waitTimeout bounds every wait for the agent to act.
const waitTimeout = 30 * time.Second

func logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// startDaemon runs a daemon on a temp data dir and a loopback port.
func startDaemon(t *testing.T, dataDir string) *daemon.Daemon {
	t.Helper()
	cfg := daemon.Default(dataDir)
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = logger().With("daemon", true)
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, d) })
	return d
}

func shutdown(t *testing.T, d *daemon.Daemon) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// runAgent runs the agent on d until the test ends (and checks that Run
// returns once stopped).
func runAgent(t *testing.T, d *daemon.Daemon, cloud agent.Cloud, addrs ...string) *agent.Agent {
	t.Helper()
	creds := d.Credentials()
	a, err := agent.New(agent.Config{
		Credentials: &creds, Addrs: addrs, Cloud: cloud, Logger: logger().With("agent", true),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(waitTimeout):
			t.Errorf("Run did not return within %v of being stopped", waitTimeout)
		}
	})
	return a
}

// operator is the admin's connection on /api.
type operator struct {
	t *testing.T
	c *client.Conn
}

func newOperator(t *testing.T, d *daemon.Daemon) *operator {
	t.Helper()
	creds := d.Credentials()
	c, err := client.Dial(t.Context(), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.LoginUser(t.Context(), "admin", creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	return &operator{t: t, c: c}
}

func (o *operator) call(method string, args, result any) {
	o.t.Helper()
	if err := o.try(method, args, result); err != nil {
		o.t.Fatalf("%s: %v", method, err)
	}
}

func (o *operator) try(method string, args, result any) error {
	ctx, cancel := context.WithTimeout(o.t.Context(), waitTimeout)
	defer cancel()
	return o.c.Call(ctx, "ModelAdmin", 1, "", method, args, result)
}

func (o *operator) status(model string) params.ModelStatus {
	o.t.Helper()
	var s params.ModelStatus
	o.call("Status", params.ModelArgs{Model: model}, &s)
	return s
}

// waitStatus waits, at most waitTimeout, until cond holds for the model's
// status: it watches the model's change feed and reads the status after
// each change, so it never sleeps.
func (o *operator) waitStatus(model, what string, cond func(params.ModelStatus) bool) params.ModelStatus {
	o.t.Helper()
	var wr params.StringsWatchResult
	o.call("WatchModel", params.ModelArgs{Model: model}, &wr)
	w := client.NewStringsWatcher(o.c, wr.StringsWatcherId)
	defer func() { _ = w.Stop(context.Background()) }()
	ctx, cancel := context.WithTimeout(o.t.Context(), waitTimeout)
	defer cancel()
	for {
		s := o.status(model)
		if cond(s) {
			return s
		}
		if _, err := w.Next(ctx); err != nil {
			o.t.Fatalf("waiting for %s in model %q: %v; last status:\n%s", what, model, err, dump(s))
		}
	}
}

// waitModelGone waits until the model is no longer listed.
func (o *operator) waitModelGone(name string) {
	o.t.Helper()
	var wr params.StringsWatchResult
	o.call("WatchModels", nil, &wr)
	w := client.NewStringsWatcher(o.c, wr.StringsWatcherId)
	defer func() { _ = w.Stop(context.Background()) }()
	ctx, cancel := context.WithTimeout(o.t.Context(), waitTimeout)
	defer cancel()
	for {
		var ms params.ListModelsResult
		o.call("ListModels", nil, &ms)
		if !slices.ContainsFunc(ms.Models, func(m params.ModelSummary) bool { return m.Name == name }) {
			return
		}
		if _, err := w.Next(ctx); err != nil {
			o.t.Fatalf("waiting for model %q to go: %v (models %+v)", name, err, ms.Models)
		}
	}
}

func dump(s params.ModelStatus) string {
	var b strings.Builder
	var walk func(ms []params.MachineStatus)
	walk = func(ms []params.MachineStatus) {
		for _, m := range ms {
			fmt.Fprintf(&b, "machine %s life=%s agent=%s instance=%q inst-status=%s addrs=%v msg=%q\n", m.ID, m.Life,
				m.AgentStatus.Status, m.InstanceID, m.InstanceStatus.Status, m.Addresses, m.InstanceStatus.Message)
			walk(m.Containers)
		}
	}
	walk(s.Machines)
	for _, a := range s.Applications {
		fmt.Fprintf(&b, "application %s life=%s scale=%d units=%d\n", a.Name, a.Life, a.Scale, len(a.Units))
		for _, u := range a.Units {
			fmt.Fprintf(&b, "  unit %s life=%s pod=%s addr=%s\n", u.Name, u.Life, u.ProviderID, u.Address)
		}
	}
	return b.String()
}

// machines flattens the model's machines and containers by id.
func machines(s params.ModelStatus) map[string]params.MachineStatus {
	out := map[string]params.MachineStatus{}
	var walk func(ms []params.MachineStatus)
	walk = func(ms []params.MachineStatus) {
		for _, m := range ms {
			out[m.ID] = m
			walk(m.Containers)
		}
	}
	walk(s.Machines)
	return out
}

func started(m params.MachineStatus) bool {
	return m.InstanceID != "" && m.AgentStatus.Status == "started" && m.InstanceStatus.Status == "running"
}

// The environ provisioner starts a machine with hardware from its
// constraints; its agent logs in and provisions a container with an
// address from the model's subnet; remove-machine --force makes both go.
func TestMachinesAndContainers(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	cloud := agent.NewSimCloud()
	runAgent(t, d, cloud)
	op := newOperator(t, d)
	op.call("AddSpace", params.AddSpaceArgs{Name: "db"}, nil)
	op.call("AddSubnet", params.AddSubnetArgs{CIDR: "10.0.0.0/24", Space: "db", Zones: []string{"zone-a"},
		ProviderID: "subnet-0", AllocatableRange: "10.0.0.10-10.0.0.200"}, nil)
	var added params.AddMachinesResult
	op.call("AddMachines", params.AddMachinesArgs{Base: "ubuntu@22.04", Constraints: "cores=2 mem=4G"}, &added)
	if !slices.Equal(added.Machines, []string{"0"}) {
		t.Fatalf("added %v", added.Machines)
	}
	s := op.waitStatus("default", "machine 0 started", func(s params.ModelStatus) bool {
		m, ok := machines(s)["0"]
		return ok && started(m) && m.SupportedContainers != nil
	})
	m0 := machines(s)["0"]
	if m0.InstanceID != "i-0" || !strings.Contains(m0.Hardware, "cores=2") || !strings.Contains(m0.Hardware, "mem=4096M") ||
		!strings.Contains(m0.Hardware, "availability-zone=zone-a") {
		t.Errorf("machine 0: instance %q hardware %q", m0.InstanceID, m0.Hardware)
	}
	if got := *m0.SupportedContainers; !slices.Equal(got, []string{"lxd", "kvm"}) {
		t.Errorf("supported containers %v", got)
	}

	op.call("AddMachines", params.AddMachinesArgs{Placement: "lxd:0"}, &added)
	s = op.waitStatus("default", "container 0/lxd/0 started", func(s params.ModelStatus) bool {
		m, ok := machines(s)["0/lxd/0"]
		return ok && started(m)
	})
	c := machines(s)["0/lxd/0"]
	if c.InstanceID != "i-0-lxd-0" || len(c.Addresses) != 1 || !strings.HasPrefix(c.Addresses[0], "10.0.0.") {
		t.Errorf("container: %+v", c)
	}
	if cloud.Instances() != 2 {
		t.Errorf("cloud runs %d instances; want 2", cloud.Instances())
	}

	var dying params.RemoveMachinesResult
	if err := op.try("RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0"}}, &dying); !client.IsCode(err, params.CodeHasContainers) {
		t.Fatalf("remove-machine 0 without force: %v", err)
	}
	op.call("RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0"}, Force: true}, &dying)
	s = op.waitStatus("default", "machines gone", func(s params.ModelStatus) bool { return len(s.Machines) == 0 })
	for _, sn := range s.Subnets {
		if len(sn.Addresses) != 0 {
			t.Errorf("subnet %s still has addresses %+v", sn.CIDR, sn.Addresses)
		}
	}
	if cloud.Instances() != 0 {
		t.Errorf("cloud still runs %d instances", cloud.Instances())
	}
}

// Config.Observe is told when a machine's agent has started and when the
// machine is removed.
func TestObserve(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	events := make(chan agent.Event, 100)
	creds := d.Credentials()
	a, err := agent.New(agent.Config{Credentials: &creds, Logger: logger(), Observe: func(e agent.Event) {
		select {
		case events <- e:
		default:
			t.Errorf("events channel full at %+v", e)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	op := newOperator(t, d)
	want := func(kind agent.EventKind, id string) {
		t.Helper()
		deadline := time.After(waitTimeout)
		for {
			select {
			case e := <-events:
				if e.Kind == kind && e.ID == id && e.Model == creds.DefaultModelUUID {
					return
				}
			case <-deadline:
				t.Fatalf("no %s event for %s", kind, id)
			}
		}
	}
	op.call("AddMachines", params.AddMachinesArgs{}, nil)
	want(agent.EventMachineStarted, "0")
	op.call("RemoveMachines", params.RemoveMachinesArgs{Machines: []string{"0"}}, nil)
	want(agent.EventMachineRemoved, "0")
}

func TestParentOf(t *testing.T) {
	for id, want := range map[string]string{"0": "", "0/lxd/1": "0", "0/lxd/1/kvm/2": "0/lxd/1", "12/kvm/0": "12"} {
		if got := agent.ParentOf(id); got != want {
			t.Errorf("parentOf(%q) = %q; want %q", id, got, want)
		}
	}
}
