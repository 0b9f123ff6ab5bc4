package provisiondtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/provisiondtest/internal/etcdhook"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher/watchertest"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), provisiondtest.CallTimeout)
	t.Cleanup(cancel)
	return ctx
}

// exercise drives a server through every kind of helper, so the
// start/stop checks below see a daemon that did real work.
func exercise(t *testing.T, srv *provisiondtest.Server) {
	t.Helper()
	ctx := ctxT(t)
	model := srv.DefaultModel()
	agent := srv.MachineAgent(t, model, "0/lxd/0")
	if life, err := client.NewProvisioner(agent).Machine("machine-0-lxd-0").Life(ctx); err != nil || life != "alive" {
		t.Fatalf("Life = %q, %v", life, err)
	}
	ctrl := srv.ControllerAgent(t, model)
	w, err := client.NewProvisioner(ctrl).WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := provisiondtest.Next(t, w); !slices.Equal(got, []string{"0"}) {
		t.Fatalf("machines = %v", got)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	k8s := srv.CAASModel(t, "k8s", provisiondtest.CAASApp{Name: "gitlab", Scale: 2})
	caas := client.NewCAASUnitProvisioner(srv.ControllerAgent(t, k8s))
	if n, err := caas.Application("gitlab").Scale(ctx); err != nil || n != 2 {
		t.Fatalf("scale = %d, %v", n, err)
	}
}

func TestStartStopLeavesNothing(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	before := listDir(t, cwd)

	var dataDir string
	t.Run("Start", func(t *testing.T) {
		srv := provisiondtest.Start(t)
		dataDir = srv.DataDir()
		if !strings.HasPrefix(dataDir, tmp) {
			t.Fatalf("data dir %s is not under $TMPDIR %s", dataDir, tmp)
		}
		exercise(t, srv)
	})
	if err := leaktest.Check(5 * time.Second); err != nil {
		t.Fatalf("after Start's cleanup: %v", err)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s left behind: %v", dataDir, err)
	}

	t.Run("New", func(t *testing.T) {
		srv, err := provisiondtest.New()
		if err != nil {
			t.Fatal(err)
		}
		dataDir = srv.DataDir()
		exercise(t, srv)
		// exercise's connections close at this subtest's cleanup, before
		// Close: Close also closes connections still open.
		t.Cleanup(func() {
			if err := srv.Close(); err != nil {
				t.Error(err)
			}
			if err := srv.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	})
	if err := leaktest.Check(5 * time.Second); err != nil {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New's data dir %s left behind: %v", dataDir, err)
	}
	if left := listDir(t, tmp); len(left) != 0 {
		t.Errorf("$TMPDIR holds %v", left)
	}

	// A data dir given with WithDataDir is the caller's: Close keeps it,
	// and removes the temp dir New made.
	given := filepath.Join(t.TempDir(), "data")
	srv, err := provisiondtest.New(provisiondtest.WithDataDir(given))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(given, daemon.CredentialsFile)); err != nil {
		t.Errorf("Close removed the data dir given with WithDataDir: %v", err)
	}
	if left := listDir(t, tmp); len(left) != 0 {
		t.Errorf("$TMPDIR holds %v after New with WithDataDir", left)
	}
	if after := listDir(t, cwd); !slices.Equal(before, after) {
		t.Errorf("the package dir changed: %v, then %v", before, after)
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestTwoServersAreIndependent(t *testing.T) {
	a, b := provisiondtest.Start(t), provisiondtest.Start(t)
	ca, cb := a.Credentials(), b.Credentials()
	switch {
	case a.Addr() == b.Addr(), a.DataDir() == b.DataDir():
		t.Fatalf("shared address or data dir: %s %s, %s %s", a.Addr(), a.DataDir(), b.Addr(), b.DataDir())
	case ca.ControllerUUID == cb.ControllerUUID, ca.DefaultModelUUID == cb.DefaultModelUUID:
		t.Fatal("shared controller or model UUID")
	case ca.CACert == cb.CACert, ca.AdminPassword == cb.AdminPassword:
		t.Fatal("shared CA or admin password")
	}
	// A's CA does not verify B.
	cb.CACert = ca.CACert
	if c, err := client.DialCredentials(ctxT(t), cb, client.Config{}); err == nil {
		c.Close()
		t.Fatal("B verified against A's CA")
	}
	// A model and a machine made in A are not in B.
	a.AddModel(t, "only-in-a", "iaas", nil)
	a.MachineAgent(t, a.DefaultModel(), "1")
	mb := client.NewModelAdmin(b.Admin(t, ""))
	models, err := mb.ListModels(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models.Models {
		if m.Name == "only-in-a" {
			t.Error("B lists A's model")
		}
	}
	st, err := mb.Status(ctxT(t), params.ModelArgs{})
	if err != nil || len(st.Machines) != 0 {
		t.Errorf("B's default model: %+v, %v", st.Machines, err)
	}
	// Each has its own machine 0.
	for _, srv := range []*provisiondtest.Server{a, b} {
		if _, err := client.NewProvisioner(srv.MachineAgent(t, srv.DefaultModel(), "0")).Machine("machine-0").Life(ctxT(t)); err != nil {
			t.Error(err)
		}
	}
}

// fakeTB records what a failed helper reports; Fatal ends the goroutine
// as testing's does.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	msgs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatal(args ...any) {
	f.mu.Lock()
	f.msgs = append(f.msgs, fmt.Sprint(args...))
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) { f.Fatal(fmt.Sprintf(format, args...)) }
func (f *fakeTB) Cleanup(fn func())                 { f.cleanups = append(f.cleanups, fn) }

// run calls fn with a fakeTB on a goroutine of its own and returns what it
// reported, after running its cleanups.
func run(t *testing.T, fn func(tb testing.TB)) string {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return strings.Join(f.msgs, "\n")
}

func TestFailingStartReportsWhy(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-cert.pem")
	msg := run(t, func(tb testing.TB) {
		provisiondtest.Start(tb, testkit.WithDaemonConfig(func(c *daemon.Config) {
			c.CertFile, c.KeyFile = missing, missing
		}))
		tb.Fatal("Start returned")
	})
	for _, want := range []string{"the daemon did not start", "tls", missing, "the daemon's log", "state opened"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failure does not say %q:\n%s", want, msg)
		}
	}

	_, err := provisiondtest.New(provisiondtest.WithStore("mongo"))
	if err == nil || !strings.Contains(err.Error(), `unknown store "mongo"`) {
		t.Errorf("unknown store: %v", err)
	}

	// An etcd nobody answers on: the error names it.
	_, err = provisiondtest.New(provisiondtest.WithEtcd([]string{"http://127.0.0.1:1"}, ""),
		testkit.WithDaemonConfig(func(c *daemon.Config) { c.Etcd.DialTimeout = time.Second }))
	if err == nil || !strings.Contains(err.Error(), "etcd http://127.0.0.1:1") {
		t.Errorf("etcd not answering: %v", err)
	}

	// StoreEtcd alone in a test that did not link the embedded etcd in: the
	// error says what to import.
	linked := etcdhook.Start
	etcdhook.Start = nil
	_, err = provisiondtest.New(provisiondtest.WithStore(provisiondtest.StoreEtcd))
	etcdhook.Start = linked
	if err == nil || !strings.Contains(err.Error(), `import _ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd"`) {
		t.Errorf("StoreEtcd without an embedded etcd: %v", err)
	}

	// A data dir that is a file.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = provisiondtest.New(provisiondtest.WithDataDir(file))
	if err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("data dir on a file: %v", err)
	}
}

func TestMachineAgent(t *testing.T) {
	srv := provisiondtest.Start(t)
	ctx := ctxT(t)
	model := srv.DefaultModel()

	// Machine 2 of an empty model: 0, 1 and 2 are added; only 2 is
	// provisioned.
	p := client.NewProvisioner(srv.MachineAgent(t, model, "2"))
	if life, err := p.Machine("machine-2").Life(ctx); err != nil || life != "alive" {
		t.Fatalf("machine 2: %q, %v", life, err)
	}
	ctrl := client.NewProvisioner(srv.ControllerAgent(t, model))
	ids, err := ctrl.InstanceId(ctx, client.Entities("machine-0", "machine-1", "machine-2"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range ids.Results[:2] {
		if !errors.Is(r.Error, client.ErrNotProvisioned) {
			t.Errorf("machine %d: %+v", i, r)
		}
	}
	if r := ids.Results[2]; r.Error != nil || r.Result != "provisiondtest-2" {
		t.Errorf("machine 2: %+v", r)
	}
	if st, err := ctrl.Machine("machine-2").InstanceStatus(ctx); err != nil || st.Status != "running" {
		t.Errorf("instance status = %+v, %v", st, err)
	}

	// Again: the same login.
	first := srv.ProvisionMachine(t, model, "2")
	if again := srv.ProvisionMachine(t, model, "2"); again != first {
		t.Errorf("second ProvisionMachine = %+v; want %+v", again, first)
	}
	if !strings.HasPrefix(first.Nonce, "machine-0:") || first.Tag != "machine-2" || len(first.Password) < 18 {
		t.Errorf("login = %+v", first)
	}

	// A container, provisioned by its host's agent (machine 1 becomes
	// ready for that), and its own container.
	c := srv.MachineAgent(t, model, "1/lxd/0/lxd/0")
	if life, err := client.NewProvisioner(c).Machine("machine-1-lxd-0-lxd-0").Life(ctx); err != nil || life != "alive" {
		t.Fatalf("grandchild: %q, %v", life, err)
	}
	host := srv.ProvisionMachine(t, model, "1/lxd/0")
	if !strings.HasPrefix(host.Nonce, "machine-1:") {
		t.Errorf("1/lxd/0 nonce %q: not from machine 1's agent", host.Nonce)
	}

	// A machine provisioned outside the kit, and one that cannot be added.
	if _, err := testkit.Daemon(srv).State().AddMachine(t.Context(), model, state.MachineParams{Nonce: "n", InstanceID: "i-x"}); err != nil {
		t.Fatal(err)
	}
	if msg := run(t, func(tb testing.TB) { srv.MachineAgent(tb, model, "3") }); !strings.Contains(msg, "already provisioned") {
		t.Errorf("machine provisioned outside: %q", msg)
	}
	if msg := run(t, func(tb testing.TB) { srv.MachineAgent(tb, "", "0") }); !strings.Contains(msg, "needs a model") {
		t.Errorf("no model: %q", msg)
	}
}

func TestCAASModelAndRevisions(t *testing.T) {
	srv := provisiondtest.Start(t)
	ctx := ctxT(t)
	rev := srv.Revision()
	k8s := srv.CAASModel(t, "k8s",
		provisiondtest.CAASApp{Name: "gitlab", Scale: 3, Trust: true},
		provisiondtest.CAASApp{Name: "idle", Scale: 0})
	if srv.Revision() <= rev {
		t.Fatalf("revision %d after the model's writes; was %d", srv.Revision(), rev)
	}
	srv.WaitRevision(t, srv.Revision())

	u := client.NewCAASUnitProvisioner(srv.ControllerAgent(t, k8s))
	scale, err := u.ApplicationsScale(ctx, client.Entities("application-gitlab", "application-idle", "application-none"))
	if err != nil {
		t.Fatal(err)
	}
	if scale.Results[0].Result != 3 || scale.Results[1].Result != 0 || !errors.Is(scale.Results[2].Error, client.ErrNotFound) {
		t.Errorf("scales = %+v", scale.Results)
	}
	if trust, err := u.Application("gitlab").Trust(ctx); err != nil || !trust {
		t.Errorf("trust = %v, %v", trust, err)
	}
	if info, err := u.Application("gitlab").ProvisioningInfo(ctx); err != nil || info == nil {
		t.Errorf("ProvisioningInfo = %+v, %v", info, err)
	}
}

func TestLimitsAndClock(t *testing.T) {
	clock := watchertest.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	srv := provisiondtest.Start(t, provisiondtest.WithClock(clock),
		provisiondtest.WithLimits(provisiondtest.Limits{MaxWatchers: 2, MaxBulkItems: 3}))
	ctx := ctxT(t)
	p := client.NewProvisioner(srv.ControllerAgent(t, srv.DefaultModel()))

	// The error retry watcher runs on the fake clock.
	w, err := p.WatchMachineErrorRetry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	provisiondtest.Next(t, w) // the initial event
	clock.WaitTimers(t, 1)
	provisiondtest.NoNext(t, w)
	clock.Advance(time.Minute)
	provisiondtest.Next(t, w)

	// The watcher quota is 2.
	w2, err := p.WatchForModelConfigChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if _, err := p.WatchAPIHostPorts(ctx); !errors.Is(err, client.ErrQuotaLimitExceeded) {
		t.Fatalf("third watcher: %v", err)
	}
	// A bulk call of 4 items is over the limit of 3.
	if _, err := p.Life(ctx, client.Entities("machine-0", "machine-1", "machine-2")); err != nil {
		t.Fatalf("3 items: %v", err)
	}
	if _, err := p.Life(ctx, client.Entities("machine-0", "machine-1", "machine-2", "machine-3")); !errors.Is(err, client.ErrQuotaLimitExceeded) {
		t.Fatalf("4 items: %v", err)
	}
}

// TestEtcdServers: a Server on its own embedded etcd works as on bbolt, a
// second one joins its controller, and closing them leaves no goroutine
// and nothing in $TMPDIR (New's temp dir holds etcd's and the daemon's
// directories: Close removes all of it, not only the daemon's).
func TestEtcdServers(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	a, err := provisiondtest.New(provisiondtest.WithStore(provisiondtest.StoreEtcd))
	if err != nil {
		t.Fatal(err)
	}
	b, err := provisiondtest.New(provisiondtest.Join(a))
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	if a.Credentials().ControllerUUID != b.Credentials().ControllerUUID {
		t.Error("the joined Server runs another controller")
	}
	agent := b.MachineAgent(t, b.DefaultModel(), "0")
	if _, err := client.NewProvisioner(agent).Life(context.Background(), params.Entities{Entities: []params.Entity{{Tag: "machine-0"}}}); err != nil {
		t.Error(err)
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	if err := a.Close(); err != nil {
		t.Error(err)
	}
	if left := listDir(t, tmp); len(left) != 0 {
		t.Errorf("$TMPDIR holds %v after Close", left)
	}
}

// The helpers take a model's name as well as its UUID, as provisionctl's
// -m does; a test daemon logs no warning about its data dir's permissions.
func TestModelByNameAndQuietDataDir(t *testing.T) {
	s := provisiondtest.Start(t)
	admin := client.NewModelAdmin(s.Admin(t, "default"))
	ctx, cancel := context.WithTimeout(context.Background(), provisiondtest.CallTimeout)
	defer cancel()
	info, err := admin.ModelConfig(ctx, params.ModelArgs{})
	if err != nil || info.UUID != s.DefaultModel() {
		t.Fatalf("ModelConfig on the connection to \"default\" = %+v, %v; want model %s", info, err, s.DefaultModel())
	}
	if login := s.ProvisionMachine(t, "default", "0"); login.Model != s.DefaultModel() {
		t.Errorf("ProvisionMachine by name: login's model %q, want the UUID %s", login.Model, s.DefaultModel())
	}
	if strings.Contains(s.Log(), "permissions") {
		t.Errorf("the daemon's log speaks of the data dir's permissions:\n%s", s.Log())
	}
}
