// Package outside_test uses provisiondtest from another module: it can
// import only the kit's exported API and the public packages beside it.
package outside_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/watcher/watchertest"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

// Every option of the kit can be made from outside.
var _ = []provisiondtest.Option{
	provisiondtest.WithAgent(),
	provisiondtest.WithLimits(provisiondtest.Limits{MaxWatchers: 10, PingTimeout: time.Second, LoginFailures: 3}),
	provisiondtest.WithClock(watchertest.NewFakeClock(time.Unix(0, 0))),
	provisiondtest.WithLogLevel(slog.LevelDebug),
	provisiondtest.WithLogOutput(io.Discard),
	provisiondtest.WithDataDir("dir"),
	provisiondtest.WithStore(provisiondtest.StoreBolt),
	provisiondtest.WithEtcd([]string{"http://127.0.0.1:2379"}, "/prefix/"),
}

// The reference agent provisions what the operator adds.
func TestAgentProvisions(t *testing.T) {
	srv := provisiondtest.Start(t, provisiondtest.WithAgent())
	admin := client.NewModelAdmin(srv.Admin(t, "default"))
	if _, err := admin.AddMachines(t.Context(), params.AddMachinesArgs{Base: "ubuntu@22.04"}); err != nil {
		t.Fatal(err)
	}
	st := srv.WaitStatus(t, "default", func(st params.ModelStatus) bool {
		return len(st.Machines) == 1 && st.Machines[0].InstanceID != ""
	})
	t.Log(st.Machines[0].InstanceID)
}

// The kit's helpers, without an agent.
func TestHelpers(t *testing.T) {
	srv := provisiondtest.Start(t)
	var login provisiondtest.AgentLogin = srv.ProvisionMachine(t, "default", "0/lxd/0")
	t.Log(login.Tag, srv.CredentialsFile(), srv.Credentials().DefaultModelUUID)

	k8s := srv.CAASModel(t, "k8s", provisiondtest.CAASApp{Name: "web", Scale: 1})
	w, err := client.NewCAASUnitProvisioner(srv.ControllerAgent(t, k8s)).WatchApplications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	provisiondtest.Next(t, w)
}

// Two daemons of one controller on the kit's embedded etcd.
func TestEtcd(t *testing.T) {
	first := provisiondtest.Start(t, provisiondtest.WithStore(provisiondtest.StoreEtcd))
	second := provisiondtest.Start(t, provisiondtest.Join(first))
	endpoints, prefix := second.Etcd()
	second.WaitRevision(t, first.Revision())
	t.Log(endpoints, prefix)
}
