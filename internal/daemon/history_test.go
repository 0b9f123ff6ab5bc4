package daemon_test

import (
	"strings"
	"testing"

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
