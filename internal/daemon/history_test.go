package daemon_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestHistoryOverTheWire: an agent's call and an admin's, through the
// real websocket, are in ModelAdmin.History with who made them (the
// agent's tag, the admin's), from where, on which daemon and by which
// call, and what they changed; on bbolt and on etcd. Agents may not read
// it: the whole facade is the controller's superusers'.
func TestHistoryOverTheWire(t *testing.T) {
	for _, engine := range []provisiondtest.Store{provisiondtest.StoreBolt, provisiondtest.StoreEtcd} {
		t.Run(string(engine), func(t *testing.T) {
			srv := provisiondtest.Start(t, provisiondtest.WithStore(engine))
			d := testkit.Daemon(srv)
			ctx := ctxT(t)
			model := srv.DefaultModel()
			admin := client.NewModelAdmin(srv.Admin(t, model))
			if _, err := admin.AddMachines(ctx, params.AddMachinesArgs{}); err != nil {
				t.Fatal(err)
			}
			prov := client.NewProvisioner(srv.ControllerAgent(t, model))
			res, err := prov.SetInstanceStatus(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{
				{Tag: "machine-0", Status: "running", Info: "up"}}})
			if err != nil || len(res.Results) != 1 || res.Results[0].Error != nil {
				t.Fatalf("SetInstanceStatus = %+v, %v", res, err)
			}
			page, err := admin.History(ctx, params.HistoryArgs{Model: model, Entity: "machine-0"})
			if err != nil || page.More || page.OldestRevision == 0 {
				t.Fatalf("History = %+v, %v", page, err)
			}
			var created, status *params.HistoryChange
			for i, c := range page.Changes {
				if c.Kind != "machine" || c.ID != "0" || c.Daemon != d.ServerID() || !strings.HasPrefix(c.Address, "127.0.0.1:") {
					t.Errorf("change %+v: want machine 0's, made through %s from loopback", c, d.ServerID())
				}
				switch {
				case c.Op == "created" && c.Call == "ModelAdmin.AddMachines" && c.Who == "user-admin":
					created = &page.Changes[i]
				case c.Call == "Provisioner.SetInstanceStatus" && c.Field == "instance-status" && strings.HasPrefix(c.Who, "machine-"):
					status = &page.Changes[i]
				}
			}
			if created == nil || status == nil || !strings.Contains(status.After, `"running"`) || !strings.Contains(status.Before, `"pending"`) {
				t.Fatalf("history of machine-0 lacks its creation by the admin or its status by the agent: %+v", page.Changes)
			}
			// A time range that ends before the status write leaves it out.
			page, err = admin.History(ctx, params.HistoryArgs{Model: model, Entity: "machine-0", Until: created.Time})
			if err != nil || len(page.Changes) == 0 {
				t.Fatalf("History until %s = %+v, %v", created.Time, page, err)
			}
			for _, c := range page.Changes {
				if c.Revision > created.Revision {
					t.Errorf("until %s: %+v", created.Time, c)
				}
			}
			// An agent is refused.
			var out params.HistoryResult
			err = srv.ControllerAgent(t, model).Call(ctx, "ModelAdmin", 1, "", "History", params.HistoryArgs{}, &out)
			if params.ErrCode(err) != params.CodeUnauthorized {
				t.Errorf("an agent's History: %v, want unauthorized", err)
			}
		})
	}
}

// pastStatus is a live status as StatusAt rebuilds it: without the
// agents' presence, which the history does not keep. (The steps of
// TestStatusAtOverTheWire leave every machine's agent status pending, which
// presence never shows as down.)
func pastStatus(s params.ModelStatus) params.ModelStatus {
	s.ProvisionerAgent = nil
	var strip func(ms []params.MachineStatus)
	strip = func(ms []params.MachineStatus) {
		for i := range ms {
			ms[i].AgentPresence = nil
			strip(ms[i].Containers)
		}
	}
	strip(s.Machines)
	return s
}

// TestStatusAtOverTheWire: a model changed in known steps (machines and a
// container added, their instance statuses set by the agent, an
// application deployed with units, a machine with a volume, a container
// made dying)
// reports, through ModelAdmin.StatusAt over the wire, at each step's
// revision and at each step's time, the status read live at that step
// (the oracle: recorded as the steps were taken, compared afterwards);
// on bbolt and on etcd. A point in the future or not a point is not
// valid; one before the history kept is not found and names the oldest
// point kept; agents are refused.
func TestStatusAtOverTheWire(t *testing.T) {
	for _, engine := range []provisiondtest.Store{provisiondtest.StoreBolt, provisiondtest.StoreEtcd} {
		t.Run(string(engine), func(t *testing.T) {
			srv := provisiondtest.Start(t, provisiondtest.WithStore(engine))
			ctx := ctxT(t)
			model := srv.DefaultModel()
			admin := client.NewModelAdmin(srv.Admin(t, model))
			prov := client.NewProvisioner(srv.ControllerAgent(t, model))
			type step struct {
				what string
				rev  uint64
				at   string
				live params.ModelStatus
			}
			var steps []step
			record := func(what string) {
				t.Helper()
				live, err := admin.Status(ctx, params.ModelArgs{Model: model})
				if err != nil {
					t.Fatal(err)
				}
				page, err := admin.History(ctx, params.HistoryArgs{Since: "1"})
				if err != nil {
					t.Fatal(err)
				}
				// The revision of the step: the latest the history has.
				rev := page.Next
				for page.More {
					if page, err = admin.History(ctx, params.HistoryArgs{After: page.Next}); err != nil {
						t.Fatal(err)
					}
					rev = page.Next
				}
				steps = append(steps, step{what, rev, time.Now().UTC().Format(time.RFC3339Nano), pastStatus(live)})
			}
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				record(what)
			}
			record("the model as it started")
			_, err := admin.AddMachines(ctx, params.AddMachinesArgs{Count: 2, Constraints: "mem=4G"})
			must("two machines", err)
			_, err = admin.AddMachines(ctx, params.AddMachinesArgs{Placement: "lxd:0"})
			must("a container", err)
			_, err = prov.SetInstanceStatus(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{
				{Tag: "machine-0", Status: "running", Info: "up"}, {Tag: "machine-1", Status: "allocating", Info: "waiting for room"}}})
			must("instance statuses", err)
			_, err = admin.Deploy(ctx, params.DeployArgs{Model: model, Application: "mysql", CharmMetadata: "name: mysql\n"})
			must("an application", err)
			_, err = admin.AddUnits(ctx, params.AddUnitsArgs{Model: model, Application: "mysql", To: []string{"0", "1"}})
			must("two units", err)
			_, err = prov.SetInstanceStatus(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{
				{Tag: "machine-0", Status: "running", Info: "busy"}}})
			must("a status message", err)
			_, err = admin.RemoveMachines(ctx, params.RemoveMachinesArgs{Model: model, Machines: []string{"0/lxd/0"}})
			must("the container dying", err)

			for _, s := range steps {
				for _, at := range []string{strconv.FormatUint(s.rev, 10), s.at} {
					got, err := admin.StatusAt(ctx, params.StatusAtArgs{Model: model, At: at})
					if err != nil {
						t.Fatalf("after %s: StatusAt %s: %v", s.what, at, err)
					}
					if got.Revision > s.rev || at == strconv.FormatUint(s.rev, 10) && got.Revision != s.rev {
						t.Errorf("after %s: StatusAt %s is revision %d, want %d", s.what, at, got.Revision, s.rev)
					}
					if !reflect.DeepEqual(got.Status, s.live) {
						t.Errorf("after %s: StatusAt %s:\n got %+v\nwant %+v", s.what, at, got.Status, s.live)
					}
				}
			}

			latest := steps[len(steps)-1].rev
			for _, bad := range []struct{ at, code, want string }{
				{strconv.FormatUint(latest+1000, 10), params.CodeNotValid, "is in the future: the latest is"},
				{time.Now().Add(time.Hour).UTC().Format(time.RFC3339), params.CodeNotValid, "is in the future"},
				{"yesterday", params.CodeNotValid, `at "yesterday" not valid: want a revision`},
				{"", params.CodeNotValid, "at is required"},
				{"2000-01-01T00:00:00Z", params.CodeNotFound, "is older than the history kept: the oldest point kept is revision "},
			} {
				_, err := admin.StatusAt(ctx, params.StatusAtArgs{Model: model, At: bad.at})
				if params.ErrCode(err) != bad.code || err == nil || !strings.Contains(err.Error(), bad.want) {
					t.Errorf("StatusAt %q: %v, want %q (%s)", bad.at, err, bad.want, bad.code)
				}
			}
			var out params.StatusAtResult
			err = srv.ControllerAgent(t, model).Call(ctx, "ModelAdmin", 1, "", "StatusAt", params.StatusAtArgs{At: "1"}, &out)
			if params.ErrCode(err) != params.CodeUnauthorized {
				t.Errorf("an agent's StatusAt: %v, want unauthorized", err)
			}
		})
	}
}
