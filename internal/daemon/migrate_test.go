package daemon_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/blobstore"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/migrate"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// fillController gives a controller machines, applications and units in
// its default model, and an agent binary blob in its data dir; it returns
// the login of a provisioned machine.
func fillController(t *testing.T, s *provisiondtest.Server) provisiondtest.AgentLogin {
	t.Helper()
	model := s.DefaultModel()
	login := s.ProvisionMachine(t, model, "0")
	st := testkit.Daemon(s).State()
	for i := 0; i < 20; i++ {
		if _, err := st.AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range []string{"wordpress", "mysql"} {
		if _, err := st.AddApplication(t.Context(), model, state.ApplicationParams{Name: app, CharmRevision: 3}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			if _, err := st.AddUnit(t.Context(), model, app, fmt.Sprint(i), ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	blob := []byte("a stand-in agent tarball")
	sum := sha256.Sum256(blob)
	// Its catalog entry first: the daemon removes blobs no entry names.
	if err := st.AddStoredAgentBinary(t.Context(), state.AgentBinary{Version: "3.3.0-ubuntu-amd64", SHA256: hex.EncodeToString(sum[:]),
		Size: int64(len(blob)), Stored: true}); err != nil {
		t.Fatal(err)
	}
	fs, err := blobstore.NewFS(filepath.Join(s.DataDir(), daemon.AgentBinariesDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Put(context.Background(), "3.3.0-ubuntu-amd64."+hex.EncodeToString(sum[:]), bytes.NewReader(blob), int64(len(blob)), hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	return login
}

// modelEntities lists a model's machines, applications and units by id.
func modelEntities(t *testing.T, st *state.State, model string) []string {
	t.Helper()
	var out []string
	ms, err := st.Machines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		out = append(out, "machine/"+m.ID+"/"+string(m.Life))
	}
	apps, err := st.Applications(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range apps {
		out = append(out, "application/"+a.Name)
	}
	us, err := st.Units(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		out = append(out, "unit/"+u.Name+"@"+u.MachineID)
	}
	slices.Sort(out)
	return out
}

// loginsWork logs in to s with creds (the old controller's, pointed at s)
// as the admin, the controller agent and the machine agent of login.
func loginsWork(t *testing.T, s *provisiondtest.Server, creds credentials.Credentials, login provisiondtest.AgentLogin) {
	t.Helper()
	creds.APIAddresses = []string{s.Addr()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, who := range []string{"admin", "controller agent", login.Tag} {
		model := ""
		if who == login.Tag {
			model = login.Model
		}
		c, err := client.DialCredentials(ctx, &creds, client.Config{ModelUUID: model})
		if err != nil {
			t.Fatalf("dial %s with the old CA: %v", s.Addr(), err)
		}
		switch who {
		case "admin":
			_, err = c.LoginAdmin(ctx, &creds)
		case "controller agent":
			_, err = c.LoginControllerAgent(ctx, &creds)
		default:
			_, err = c.LoginAgent(ctx, login.Tag, login.Password, login.Nonce)
		}
		c.Close()
		if err != nil {
			t.Fatalf("login as %s with the old credentials: %v", who, err)
		}
	}
}

func migrateEtcd(endpoints []string, prefix string) daemon.EtcdConfig {
	// Few operations per transaction: the load goes in many batches.
	return daemon.EtcdConfig{Endpoints: endpoints, Prefix: prefix, MaxTxnOps: 16, MaxRequestBytes: etcdtest.MaxRequestBytes}
}

// TestMigrateBoltToEtcdAndBack: a bbolt controller with machines,
// applications and units migrates into an empty etcd prefix; a daemon
// started there is the same controller (UUIDs, CA, entities) and accepts
// the old logins; migrated back into a new data dir, a daemon on bbolt is
// the same controller again. The agent binaries move with the data dirs.
func TestMigrateBoltToEtcdAndBack(t *testing.T) {
	etcd := etcdtest.New(t)
	old := provisiondtest.Start(t)
	login := fillController(t, old)
	oldCreds := *old.Credentials()
	model := old.DefaultModel()
	want := modelEntities(t, testkit.Daemon(old).State(), model)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ecfg := migrateEtcd(etcd.Endpoints(), "/migrated/")
	etcdDir := filepath.Join(t.TempDir(), "etcd-daemon")
	var phases []string
	res, err := migrate.Run(ctx, migrate.Config{
		From: migrate.End{Store: daemon.StoreBolt, DataDir: old.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg, DataDir: etcdDir},
		Progress: func(phase string, done, total int) {
			if len(phases) == 0 || phases[len(phases)-1] != phase {
				phases = append(phases, phase)
			}
			if done > total && total > 0 {
				t.Errorf("progress %s: %d of %d", phase, done, total)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Controller != oldCreds.ControllerUUID || res.Records < 50 || res.AgentBinaries != 1 {
		t.Fatalf("migrate to etcd: %+v", res)
	}
	// The history is carried, and the operator is told so.
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "history of commits (provisionctl history) is carried")
	}) {
		t.Errorf("migrate to etcd says nothing of the history: %q", res.Notes)
	}
	if !slices.Equal(phases, []string{"counting", "history", "copying", "verifying"}) {
		t.Errorf("progress phases %v", phases)
	}

	// The prefix now holds a controller: a second migrate is refused.
	_, err = migrate.Run(ctx, migrate.Config{
		From: migrate.End{Store: daemon.StoreBolt, DataDir: old.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg},
	})
	if !errors.Is(err, migrate.ErrNotEmpty) || !strings.Contains(err.Error(), "already holds controller "+oldCreds.ControllerUUID) {
		t.Fatalf("migrate into a full prefix: %v", err)
	}

	onEtcd := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/migrated/"), provisiondtest.WithDataDir(etcdDir))
	sameController(t, onEtcd, oldCreds)
	loginsWork(t, onEtcd, oldCreds, login)
	if got := modelEntities(t, testkit.Daemon(onEtcd).State(), model); !slices.Equal(got, want) {
		t.Fatalf("entities on etcd:\n%v\nwant\n%v", got, want)
	}
	if n := countFiles(t, filepath.Join(etcdDir, daemon.AgentBinariesDir)); n != 1 {
		t.Errorf("%d agent binaries in the etcd daemon's data dir, want 1", n)
	}
	// A change on etcd, to see it come back.
	if _, err := testkit.Daemon(onEtcd).State().AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	want = modelEntities(t, testkit.Daemon(onEtcd).State(), model)

	// Back to bbolt: refused while the daemon serves the prefix.
	backDir := filepath.Join(t.TempDir(), "back", "data")
	back := migrate.Config{
		From: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg, DataDir: etcdDir},
		To:   migrate.End{Store: daemon.StoreBolt, DataDir: backDir},
	}
	if _, err := migrate.Run(ctx, back); err == nil || !strings.Contains(err.Error(), "is being served by 1 daemon") {
		t.Fatalf("migrate from a served prefix: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(backDir)); !os.IsNotExist(err) {
		t.Errorf("a refused migrate made %s (%v)", filepath.Dir(backDir), err)
	}
	if err := onEtcd.Close(); err != nil {
		t.Fatal(err)
	}
	last := [2]int{}
	back.Progress = func(phase string, done, total int) {
		if phase == "copying" {
			last = [2]int{done, total}
		}
	}
	res, err = migrate.Run(ctx, back)
	if err != nil {
		t.Fatal(err)
	}
	if last[0] != last[1] || last[0] != res.Records {
		t.Errorf("the copy's progress ended at %d of %d, having copied %d records", last[0], last[1], res.Records)
	}
	if res.AgentBinaries != 1 {
		t.Errorf("migrate back: %+v", res)
	}
	for _, name := range []string{daemon.DBFile, daemon.CredentialsFile, "ca.crt", "ca.key", "server.crt", "server.key"} {
		if _, err := os.Stat(filepath.Join(backDir, name)); err != nil {
			t.Errorf("the migrated data dir: %v", err)
		}
	}
	onBolt := provisiondtest.Start(t, provisiondtest.WithDataDir(backDir))
	sameController(t, onBolt, oldCreds)
	loginsWork(t, onBolt, oldCreds, login)
	if got := modelEntities(t, testkit.Daemon(onBolt).State(), model); !slices.Equal(got, want) {
		t.Fatalf("entities back on bbolt:\n%v\nwant\n%v", got, want)
	}
	if _, ok, err := testkit.Daemon(onBolt).State().Identity(t.Context()); ok || err != nil {
		t.Errorf("the bbolt database holds an identity record (%v, %v): a bbolt controller keeps it in files", ok, err)
	}

	// A data dir that holds a database is refused.
	if _, err := migrate.Run(ctx, back); !errors.Is(err, controllerstore.ErrDataDirInUse) && !errors.Is(err, migrate.ErrNotEmpty) {
		t.Fatalf("migrate into a data dir with a database: %v", err)
	}
}

// sameController checks that s is the controller creds describe.
func sameController(t *testing.T, s *provisiondtest.Server, creds credentials.Credentials) {
	t.Helper()
	got := s.Credentials()
	switch {
	case got.ControllerUUID != creds.ControllerUUID || got.ControllerModelUUID != creds.ControllerModelUUID || got.DefaultModelUUID != creds.DefaultModelUUID:
		t.Fatalf("another controller: %+v, want %+v", got, creds)
	case got.CACert != creds.CACert:
		t.Fatal("another CA")
	case got.AdminPassword != creds.AdminPassword || got.ControllerAgent != creds.ControllerAgent:
		t.Fatal("other logins in credentials.yaml")
	}
}

func countFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// TestMigrateRefusesARunningDaemon: a data dir whose database a daemon
// holds (the bbolt lock) is refused, and so is a source or target that
// is not what migrate needs; nothing is written.
func TestMigrateRefusesBadSourcesAndTargets(t *testing.T) {
	etcd := etcdtest.New(t)
	live := provisiondtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ecfg := migrateEtcd(etcd.Endpoints(), "/refused/")
	_, err := migrate.Run(ctx, migrate.Config{
		From: migrate.End{DataDir: live.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg},
	})
	if !errors.Is(err, controllerstore.ErrDataDirInUse) || !strings.Contains(err.Error(), "stop it before migrating") {
		t.Fatalf("migrate of a live data dir: %v", err)
	}
	for _, c := range []struct {
		cfg  migrate.Config
		want string
	}{
		{migrate.Config{From: migrate.End{DataDir: t.TempDir()}, To: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg}}, "no database at"},
		{migrate.Config{To: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg}}, "needs --from-data-dir"},
		{migrate.Config{From: migrate.End{DataDir: "a"}, To: migrate.End{DataDir: "b"}}, "between bbolt and etcd"},
		{migrate.Config{From: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg}, To: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg}}, "between bbolt and etcd"},
		{migrate.Config{From: migrate.End{DataDir: "a"}, To: migrate.End{Store: daemon.StoreEtcd}}, "needs --etcd-endpoints"},
		{migrate.Config{From: migrate.End{DataDir: "a"}, To: migrate.End{Store: "mongo"}}, `--to "mongo"`},
		{migrate.Config{From: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg}, To: migrate.End{DataDir: t.TempDir()}}, "holds no controller"},
		{migrate.Config{From: migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg}, To: migrate.End{DataDir: live.DataDir()}}, "holds no controller"},
	} {
		if _, err := migrate.Run(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.cfg, err, c.want)
		}
	}

	// A stopped controller into a data dir that holds one: refused.
	stopped := provisiondtest.Start(t)
	if err := stopped.Close(); err != nil {
		t.Fatal(err)
	}
	onEtcd := provisiondtest.Start(t, provisiondtest.WithEtcd(etcd.Endpoints(), "/full/"))
	if err := onEtcd.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Run(ctx, migrate.Config{
		From: migrate.End{Store: daemon.StoreEtcd, Etcd: migrateEtcd(etcd.Endpoints(), "/full/")},
		To:   migrate.End{DataDir: stopped.DataDir()},
	})
	if !errors.Is(err, migrate.ErrNotEmpty) {
		t.Fatalf("migrate into a data dir with a database: %v", err)
	}
	// And into a prefix that holds a controller.
	_, err = migrate.Run(ctx, migrate.Config{
		From: migrate.End{DataDir: stopped.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: migrateEtcd(etcd.Endpoints(), "/full/")},
	})
	if !errors.Is(err, migrate.ErrNotEmpty) {
		t.Fatalf("migrate into a full prefix: %v", err)
	}
}

// TestMigrateLoadIsAllOrNothing: a load that fails part way (a record
// over the request size, after several batches went in) is undone, so
// the prefix is empty again; a prefix that holds the mark of an
// interrupted load is refused by daemons and by migrate, with what to do.
func TestMigrateLoadIsAllOrNothing(t *testing.T) {
	etcd := etcdtest.New(t)
	old := provisiondtest.Start(t)
	fillController(t, old)
	// A model whose record is over the request size (half of 8 KiB),
	// after the machines and units in key order.
	if _, err := testkit.Daemon(old).State().AddModel(t.Context(), "big", state.ModelTypeIAAS, map[string]any{"note": strings.Repeat("x", 6000)}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ecfg := daemon.EtcdConfig{Endpoints: etcd.Endpoints(), Prefix: "/partial/", MaxTxnOps: 8, MaxRequestBytes: 8 << 10}
	_, err := migrate.Run(ctx, migrate.Config{
		From: migrate.End{DataDir: old.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: ecfg},
	})
	if err == nil || !strings.Contains(err.Error(), "removed again") {
		t.Fatalf("a load that fails part way: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/partial/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("after a failed load the prefix holds %d keys (%v)", resp.Count, err)
	}
	// Its history archive, carried before the load, is removed with it.
	if resp, err := cli.Get(ctx, etcdstore.HistoryArchive+"/partial/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("after a failed load the history archive holds %d keys (%v)", resp.Count, err)
	}
	// ... and is no longer registered: the migrate registered it.
	if resp, err := cli.Get(ctx, etcdstore.RegistryKey("/partial/"), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Fatalf("after a failed load the prefix is registered (%d, %v)", resp.Count, err)
	}

	// An interrupted load: records and the mark, as a killed migrate
	// leaves them.
	if _, err := cli.Put(ctx, "/stray/x/y", "z"); err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Run(ctx, migrate.Config{
		From: migrate.End{DataDir: old.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: migrateEtcd(etcd.Endpoints(), "/stray/")},
	})
	if !errors.Is(err, migrate.ErrNotEmpty) || !strings.Contains(err.Error(), "is not empty (1 keys)") {
		t.Fatalf("migrate into a prefix with a stray key: %v", err)
	}
	if resp, err := cli.Get(ctx, "/stray/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 1 {
		t.Fatalf("the stray prefix after a refused migrate: %v keys (%v)", resp.Count, err)
	}

	if _, err := cli.Put(ctx, "/interrupted/meta/load", "someone"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/interrupted/controller/controller", `{"uuid":"x"}`); err != nil {
		t.Fatal(err)
	}
	_, err = provisiondtest.New(provisiondtest.WithEtcd(etcd.Endpoints(), "/interrupted/"))
	if err == nil || !strings.Contains(err.Error(), "unfinished load") || !strings.Contains(err.Error(), "etcdctl del --prefix /interrupted/") {
		t.Fatalf("a daemon on a half-loaded prefix: %v", err)
	}
	_, err = migrate.Run(ctx, migrate.Config{
		From: migrate.End{DataDir: old.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: migrateEtcd(etcd.Endpoints(), "/interrupted/")},
	})
	if err == nil || !strings.Contains(err.Error(), "unfinished load") {
		t.Fatalf("migrate into a half-loaded prefix: %v", err)
	}
}
