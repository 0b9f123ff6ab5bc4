package provisiondtest_test

import (
	"strings"
	"testing"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// WithAgent: a machine added through the kit's admin connection is
// provisioned by the reference agent (an instance id, its agent started),
// and a Kubernetes application's pods run; Close stops the agent before
// the daemon (TestMain's leak check sees none of its goroutines left).
func TestWithAgentProvisions(t *testing.T) {
	srv := provisiondtest.Start(t, provisiondtest.WithAgent())
	ctx := ctxT(t)

	admin := client.NewModelAdmin(srv.Admin(t, "default"))
	added, err := admin.AddMachines(ctx, params.AddMachinesArgs{Base: "ubuntu@22.04"})
	if err != nil {
		t.Fatal(err)
	}
	id := added.Machines[0]
	st := srv.WaitStatus(t, "default", func(st params.ModelStatus) bool {
		return len(st.Machines) == 1 && st.Machines[0].AgentStatus.Status == "started"
	})
	m := st.Machines[0]
	if m.ID != id || m.InstanceID == "" || m.InstanceStatus.Status != "running" {
		t.Fatalf("machine %s: id %s instance %q (status %q), agent %q", id, m.ID, m.InstanceID, m.InstanceStatus.Status, m.AgentStatus.Status)
	}

	srv.CAASModel(t, "k8s", provisiondtest.CAASApp{Name: "web", Scale: 2})
	st = srv.WaitStatus(t, "k8s", func(st params.ModelStatus) bool {
		if len(st.Applications) != 1 || len(st.Applications[0].Units) != 2 {
			return false
		}
		for _, u := range st.Applications[0].Units {
			if u.ProviderID == "" || u.Address == "" || u.ContainerStatus.Status != "running" {
				return false
			}
		}
		return true
	})
	if got := st.Applications[0].Name; got != "web" {
		t.Fatalf("application %q", got)
	}
}

// WaitStatus fails the test, with the last status, when the condition
// does not hold; a model it cannot find fails it at once.
func TestWaitStatusReportsWhy(t *testing.T) {
	srv := provisiondtest.Start(t)
	msg := run(t, func(tb testing.TB) {
		srv.WaitStatus(tb, "no-such-model", func(params.ModelStatus) bool { return true })
		tb.Fatal("WaitStatus returned")
	})
	if want := `model "no-such-model"`; !strings.Contains(msg, want) {
		t.Errorf("the failure does not say %q:\n%s", want, msg)
	}
}
