package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/migrate"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// historyLines reads every change the history of s keeps up to revision
// until (0: all), through ModelAdmin.History page by page, as
// provisionctl history prints them, each followed by the change's JSON;
// and the revision of the last.
func historyLines(t *testing.T, s *provisiondtest.Server, until uint64) ([]string, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := client.NewModelAdmin(s.Admin(t, s.DefaultModel()))
	args := params.HistoryArgs{Limit: 7}
	if until > 0 {
		args.Until = strconv.FormatUint(until, 10)
	}
	var lines []string
	var last uint64
	for {
		page, err := admin.History(ctx, args)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Changes {
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, c.Line("", func(v string) string { return v }), string(b))
			last = c.Revision
		}
		if !page.More {
			return lines, last
		}
		args.After = page.Next
	}
}

// carryPoint is a model's status as read at a revision, to ask StatusAt
// for after a copy.
type carryPoint struct {
	rev    uint64
	status params.ModelStatus
}

// changeModel makes changes in s's default model, as the admin and as the
// controller agent, some of them at once (on etcd, group commits), and
// returns the status after the first of them and its revision.
func changeModel(t *testing.T, s *provisiondtest.Server) carryPoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	model := s.DefaultModel()
	admin := client.NewModelAdmin(s.Admin(t, model))
	if _, err := admin.AddMachines(ctx, params.AddMachinesArgs{Count: 4, Constraints: "mem=2G"}); err != nil {
		t.Fatal(err)
	}
	live, err := admin.Status(ctx, params.ModelArgs{Model: model})
	if err != nil {
		t.Fatal(err)
	}
	_, rev := historyLines(t, s, 0)
	point := carryPoint{rev, pastStatus(live)}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prov := client.NewProvisioner(s.ControllerAgent(t, model))
			for j := range 3 {
				if _, err := prov.SetInstanceStatus(ctx, params.SetStatus{Entities: []params.EntityStatusArgs{
					{Tag: fmt.Sprintf("machine-%d", i), Status: "running", Info: fmt.Sprintf("step %d", j)}}}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if _, err := admin.RemoveMachines(ctx, params.RemoveMachinesArgs{Model: model, Machines: []string{"3"}}); err != nil {
		t.Fatal(err)
	}
	return point
}

// sameHistory checks that s's history up to revision until reads as want,
// byte for byte, and that the model at p is rebuilt as it was.
func sameHistory(t *testing.T, what string, s *provisiondtest.Server, until uint64, want []string, p carryPoint) {
	t.Helper()
	got, _ := historyLines(t, s, until)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the history reads\n%s\nwant\n%s", what, bytes.Join(toBytes(got), []byte("\n")), bytes.Join(toBytes(want), []byte("\n")))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := client.NewModelAdmin(s.Admin(t, s.DefaultModel()))
	at, err := admin.StatusAt(ctx, params.StatusAtArgs{Model: s.DefaultModel(), At: strconv.FormatUint(p.rev, 10)})
	if err != nil {
		t.Fatalf("%s: StatusAt %d: %v", what, p.rev, err)
	}
	if at.Revision != p.rev || !reflect.DeepEqual(at.Status, p.status) {
		t.Fatalf("%s: StatusAt %d is revision %d:\n%+v\nwant\n%+v", what, p.rev, at.Revision, at.Status, p.status)
	}
}

func toBytes(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestHistoryCarriedByBackup: a backup carries the history, on each
// engine: after a restore, ModelAdmin.History reads the same changes up to
// the last one read before the backup (the same lines provisionctl
// history prints, and the same JSON), and StatusAt rebuilds the model at
// a revision from before the backup as it was. A bbolt daemon's archive
// restores into bbolt; an etcd daemon's into another etcd prefix and into
// bbolt.
func TestHistoryCarriedByBackup(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) {
		a := provisiondtest.Start(t)
		p := changeModel(t, a)
		want, last := historyLines(t, a, 0)
		archive := fetchBackup(t, a)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "data")
		if err := backup.Restore(bytes.NewReader(archive), dir, backup.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		sameHistory(t, "restored", provisiondtest.Start(t, provisiondtest.WithDataDir(dir)), last, want, p)
	})
	t.Run("etcd", func(t *testing.T) {
		etcd := etcdtest.New(t)
		a := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/carried/"))
		p := changeModel(t, a)
		want, last := historyLines(t, a, 0)
		archive := fetchBackup(t, a)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := backup.RestoreToEtcd(ctx, bytes.NewReader(archive), migrateEtcd(etcd.Endpoints(), "/carried-restored/"), t.TempDir(), false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !res.History.Carried || res.History.Newest < last {
			t.Fatalf("restore into etcd carried %+v, want up to %d", res.History, last)
		}
		onEtcd := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/carried-restored/"))
		sameHistory(t, "restored on etcd", onEtcd, last, want, p)
		if err := onEtcd.Close(); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "data")
		if err := backup.Restore(bytes.NewReader(archive), dir, backup.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		sameHistory(t, "restored on bbolt", provisiondtest.Start(t, provisiondtest.WithDataDir(dir)), last, want, p)
	})
}

// TestHistoryCarriedByMigrate: migrate keeps the history: a bbolt
// controller migrated into etcd, changed there, and migrated back into
// bbolt reads the same history at each step (every record, with its
// revision, time and origin), the target's own commits numbered after
// the source's, and StatusAt rebuilds a point from before both
// migrations.
func TestHistoryCarriedByMigrate(t *testing.T) {
	etcd := etcdtest.New(t)
	a := provisiondtest.Start(t)
	p := changeModel(t, a)
	want, last := historyLines(t, a, 0)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ecfg := migrateEtcd(etcd.Endpoints(), "/carried-migrated/")
	etcdDir := filepath.Join(t.TempDir(), "etcd-daemon")
	res, err := migrate.Run(ctx, migrate.Config{
		From: migrate.End{Store: daemon.StoreBolt, DataDir: a.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg, DataDir: etcdDir},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.History.Carried || res.History.Newest < last || res.TargetRevision <= res.SourceRevision {
		t.Fatalf("migrate to etcd: %+v", res)
	}
	onEtcd := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/carried-migrated/"), provisiondtest.WithDataDir(etcdDir))
	sameHistory(t, "on etcd", onEtcd, last, want, p)
	changeModel(t, onEtcd)
	want2, last2 := historyLines(t, onEtcd, 0)
	if last2 <= res.SourceRevision {
		t.Fatalf("the last change on etcd is of revision %d, not after the source's %d", last2, res.SourceRevision)
	}
	if err := onEtcd.Close(); err != nil {
		t.Fatal(err)
	}
	backDir := filepath.Join(t.TempDir(), "back", "data")
	if res, err = migrate.Run(ctx, migrate.Config{
		From: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg, DataDir: etcdDir},
		To:   migrate.End{Store: daemon.StoreBolt, DataDir: backDir},
	}); err != nil {
		t.Fatal(err)
	}
	if !res.History.Carried || res.History.Newest < last2 {
		t.Fatalf("migrate back: %+v", res)
	}
	sameHistory(t, "back on bbolt", provisiondtest.Start(t, provisiondtest.WithDataDir(backDir)), last2, want2, p)
}
