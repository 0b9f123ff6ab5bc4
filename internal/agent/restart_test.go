package agent_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/params"
)

// The agent follows models as they are added and removed: a new IAAS
// model's machines are provisioned, a new CAAS model's pods run, and a
// removed model's provisioner stops.
func TestFollowsModels(t *testing.T) {
	d := startDaemon(t, t.TempDir())
	a := runAgent(t, d, nil)
	op := newOperator(t, d)
	op.call("AddModel", params.AddModelArgs{Name: "edge"}, nil)
	op.call("AddMachines", params.AddMachinesArgs{Model: "edge", Count: 2}, nil)
	op.waitStatus("edge", "2 machines started", func(s params.ModelStatus) bool {
		return len(s.Machines) == 2 && started(s.Machines[0]) && started(s.Machines[1])
	})
	if n := len(a.Models()); n != 3 {
		t.Errorf("agent provisions %d models; want 3", n)
	}
	// Removing it makes its machines dying; their agents make them dead,
	// the provisioner removes them, and the model goes with the last.
	op.call("RemoveModel", params.RemoveModelArgs{Model: "edge"}, nil)
	op.waitModelGone("edge")
	// An empty model goes at once; its provisioner stops.
	var edge2 params.ModelSummary
	op.call("AddModel", params.AddModelArgs{Name: "edge2"}, &edge2)
	op.call("RemoveModel", params.RemoveModelArgs{Model: "edge2"}, nil)
	op.waitModelGone("edge2")
	// The agent's view follows (it learns of the removal from the same feed).
	deadline := time.Now().Add(waitTimeout)
	for slicesContains(a.Models(), edge2.UUID) {
		if time.Now().After(deadline) {
			t.Fatalf("agent still provisions the removed model")
		}
		waitAgentTick(t, op)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// waitAgentTick waits for the agent's next write to the default model (it
// has none to do: this is a bounded wait for the agent's own goroutines,
// made by giving it something to do and waiting until it did it).
func waitAgentTick(t *testing.T, op *operator) {
	t.Helper()
	var added params.AddMachinesResult
	op.call("AddMachines", params.AddMachinesArgs{}, &added)
	op.waitStatus("default", "machine "+added.Machines[0]+" started", func(s params.ModelStatus) bool {
		m, ok := machines(s)[added.Machines[0]]
		return ok && started(m)
	})
}

// When the daemon restarts, the agent reconnects with backoff, its
// provisioners pick up what changed meanwhile, and the machine agents log
// in again and go on provisioning their containers.
func TestReconnectsAfterDaemonRestart(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.Addr()
	cloud := agent.NewSimCloud()
	runAgent(t, d, cloud, addr)
	op := newOperator(t, d)
	op.call("AddMachines", params.AddMachinesArgs{}, nil)
	op.waitStatus("default", "machine 0 started", func(s params.ModelStatus) bool {
		return len(s.Machines) == 1 && started(s.Machines[0]) && s.Machines[0].SupportedContainers != nil
	})

	shutdown(t, d)
	d2 := restartDaemon(t, dir, addr)
	op = newOperator(t, d2)
	// A container for machine 0's agent (which must have logged in again)
	// and a new machine for the environ provisioner.
	op.call("AddMachines", params.AddMachinesArgs{Placement: "lxd:0"}, nil)
	op.call("AddMachines", params.AddMachinesArgs{}, nil)
	op.waitStatus("default", "container and machine 1 started", func(s params.ModelStatus) bool {
		ms := machines(s)
		return started(ms["0/lxd/0"]) && started(ms["1"])
	})
	if cloud.Instances() != 3 {
		t.Errorf("cloud runs %d instances; want 3", cloud.Instances())
	}
}

// When the daemon restarts, the agent resumes its watchers: the models',
// each model's machines' and applications', and each application's
// scale, pod spec and trust watches (none is opened afresh: the daemon
// keeps the history after the revisions they had covered). Nothing
// changed meanwhile, so no application's pods are reconciled again; a
// scale set after the restart reaches the resumed scale watch and is
// run, once.
func TestResumesAfterDaemonRestart(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir)
	addr := d.Addr()
	creds := d.Credentials()
	var (
		mu     sync.Mutex
		events []agent.Event
	)
	stop, err := agent.Start(agent.Config{Credentials: &creds, Addrs: []string{addr}, Logger: logger().With("agent", true),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Observe: func(e agent.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	since := func(i int) []agent.Event {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events[i:])
	}
	op := newOperator(t, d)
	op.call("AddMachines", params.AddMachinesArgs{}, nil)
	op.call("AddModel", params.AddModelArgs{Name: "k8s", Type: "caas"}, nil)
	op.call("Deploy", params.DeployArgs{Model: "k8s", Application: "web", Scale: ptr(2), CharmMetadata: "name: web\n"}, nil)
	op.call("SetPodSpec", params.SetPodSpecArgs{Model: "k8s", Application: "web", Spec: "containers: []\n"}, nil)
	op.waitStatus("k8s", "2 pods", func(s params.ModelStatus) bool {
		return len(s.Applications) == 1 && len(s.Applications[0].Units) == 2
	})
	op.waitStatus("default", "machine 0 started", func(s params.ModelStatus) bool {
		return len(s.Machines) == 1 && started(s.Machines[0])
	})
	deadline := time.Now().Add(waitTimeout)
	for !slices.ContainsFunc(since(0), func(e agent.Event) bool { return e.Watch == "WatchContainers" }) {
		if time.Now().After(deadline) {
			t.Fatal("machine 0's agent does not watch its containers")
		}
		time.Sleep(10 * time.Millisecond)
	}

	shutdown(t, d)
	mu.Lock()
	restarted := len(events)
	mu.Unlock()
	d2 := restartDaemon(t, dir, addr)
	// Every watch the agent held opens again, resumed.
	resumed := func() map[string]bool {
		got := map[string]bool{}
		for _, e := range since(restarted) {
			if e.Kind == agent.EventWatched && e.Initial {
				if e.From == 0 {
					t.Fatalf("after the restart %s was opened afresh", e.Watch)
				}
				got[e.Watch] = true
			}
		}
		return got
	}
	deadline = time.Now().Add(waitTimeout)
	for want := []string{"WatchModels", "WatchModelMachines", "WatchApplications", "WatchContainers"}; ; {
		got := resumed()
		if !slices.ContainsFunc(want, func(w string) bool { return !got[w] }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watches resumed after the restart: %v; want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	op = newOperator(t, d2)
	op.call("ScaleApplication", params.ScaleArgs{Model: "k8s", Application: "web", Scale: 1}, nil)
	var reports []int
	for deadline = time.Now().Add(waitTimeout); ; {
		reports = nil
		for _, e := range since(restarted) {
			if e.Kind == agent.EventUnitsReported {
				reports = append(reports, e.Units)
			}
		}
		if slices.Contains(reports, 1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scale set after the restart is not run: pods reported %v", reports)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(reports, []int{1}) {
		t.Errorf("pods reported after the restart: %v; want once, 1 pod (for the scale set after it)", reports)
	}
}

// restartDaemon starts a daemon again on dir and addr (the one there was
// shut down), until the test ends.
func restartDaemon(t *testing.T, dir, addr string) *daemon.Daemon {
	t.Helper()
	cfg := daemon.Default(dir)
	cfg.Addr = addr
	cfg.Logger = logger().With("daemon", 2)
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatalf("restart on %s: %v", addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	return d
}
