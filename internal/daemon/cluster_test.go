package daemon_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// startEtcd starts a daemon on a new embedded etcd; more join it with
// provisiondtest.Join.
func startEtcd(t *testing.T, opts ...provisiondtest.Option) *provisiondtest.Server {
	t.Helper()
	return provisiondtest.Start(t, append([]provisiondtest.Option{provisiondtest.WithStore(provisiondtest.StoreEtcd)}, opts...)...)
}

// hostPortsOf flattens LoginResult.servers / APIHostPorts into host:port.
func hostPortsOf(servers [][]params.HostPort) []string {
	var out []string
	for _, hps := range servers {
		for _, hp := range hps {
			out = append(out, net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port)))
		}
	}
	slices.Sort(out)
	return out
}

func sortedAddrs(ss ...*provisiondtest.Server) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Addr())
	}
	slices.Sort(out)
	return out
}

// TestTwoDaemonsOneController: a second daemon on the first one's etcd
// prefix joins its controller: same UUIDs, CA, certificate and logins;
// both list both among the API servers; a change made through one reaches
// a watcher on the other.
func TestTwoDaemonsOneController(t *testing.T) {
	a := startEtcd(t)
	b := provisiondtest.Start(t, provisiondtest.Join(a))
	ca, cb := a.Credentials(), b.Credentials()
	switch {
	case ca.ControllerUUID != cb.ControllerUUID || ca.DefaultModelUUID != cb.DefaultModelUUID || ca.ControllerModelUUID != cb.ControllerModelUUID:
		t.Fatalf("two controllers: %+v and %+v", ca, cb)
	case ca.CACert != cb.CACert:
		t.Fatal("the daemons have different CAs")
	case ca.AdminPassword != cb.AdminPassword || ca.ControllerAgent != cb.ControllerAgent:
		t.Fatal("the daemons have different logins")
	}
	if certOf(t, a.Addr(), ca.CACert) != certOf(t, b.Addr(), cb.CACert) {
		t.Fatal("the daemons present different certificates")
	}

	// Agents learn both daemons: at login, and from the Provisioner.
	both := sortedAddrs(a, b)
	agent := a.ControllerAgent(t, a.DefaultModel())
	if got := hostPortsOf(agent.LoginResult().Servers); !slices.Equal(got, both) {
		t.Fatalf("LoginResult.servers = %v, want %v", got, both)
	}
	if first := agent.LoginResult().Servers[0][0]; net.JoinHostPort(first.Value, strconv.Itoa(first.Port)) != a.Addr() {
		t.Errorf("LoginResult.servers starts with %v, want the daemon logged in to (%s) first", first, a.Addr())
	}
	ctx := ctxT(t)
	hp, err := client.NewProvisioner(b.ControllerAgent(t, b.DefaultModel())).APIHostPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := hostPortsOf(hp.Servers); !slices.Equal(got, both) {
		t.Fatalf("APIHostPorts = %v, want %v", got, both)
	}

	// A machine added through a is seen by the environ provisioner
	// watching on b.
	w, err := client.NewProvisioner(b.ControllerAgent(t, b.DefaultModel())).WatchModelMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if got := provisiondtest.Next(t, w); len(got) != 0 {
		t.Fatalf("initial machines %v, want none", got)
	}
	res, err := client.NewModelAdmin(a.Admin(t, "")).AddMachines(ctx, params.AddMachinesArgs{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := provisiondtest.Next(t, w); !slices.Equal(got, res.Machines) {
		t.Fatalf("watcher on b saw %v, want %v added through a", got, res.Machines)
	}
	provisiondtest.NoNext(t, w)

	// Both credentials.yaml list both daemons.
	for _, s := range []*provisiondtest.Server{a, b} {
		waitFor(t, "credentials.yaml listing both daemons", func() bool {
			c, err := credentials.Read(s.CredentialsFile())
			if err != nil {
				return false
			}
			got := slices.Clone(c.APIAddresses)
			slices.Sort(got)
			return slices.Equal(got, both)
		})
	}
}

// TestAPIServersComeAndGo: WatchAPIHostPorts fires when a daemon joins and
// when it stops, and the addresses follow.
func TestAPIServersComeAndGo(t *testing.T) {
	a := startEtcd(t)
	ctx := ctxT(t)
	p := client.NewProvisioner(a.ControllerAgent(t, a.DefaultModel()))
	w, err := p.WatchAPIHostPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	provisiondtest.Next(t, w) // the initial event
	b, err := provisiondtest.New(provisiondtest.Join(a))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	provisiondtest.Next(t, w)
	hp, err := p.APIHostPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hostPortsOf(hp.Servers), sortedAddrs(a, b); !slices.Equal(got, want) {
		t.Fatalf("after b joined: %v, want %v", got, want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	provisiondtest.Next(t, w)
	hp, err = p.APIHostPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hostPortsOf(hp.Servers), []string{a.Addr()}; !slices.Equal(got, want) {
		t.Fatalf("after b stopped: %v, want %v", got, want)
	}
}

// TestDaemonsStartingAtOnceMakeOneController: several daemons starting at
// the same moment on an empty prefix agree on one controller.
func TestDaemonsStartingAtOnceMakeOneController(t *testing.T) {
	cluster := etcdtest.New(t)
	const n = 3
	servers := make([]*provisiondtest.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			servers[i], errs[i] = provisiondtest.New(provisiondtest.WithEtcd(cluster.Endpoints(), "/race/"))
		}()
	}
	close(start)
	wg.Wait()
	for i, s := range servers {
		if errs[i] != nil {
			t.Fatalf("daemon %d: %v", i, errs[i])
		}
		t.Cleanup(func() { s.Close() })
	}
	c0 := servers[0].Credentials()
	for i, s := range servers[1:] {
		c := s.Credentials()
		if c.ControllerUUID != c0.ControllerUUID || c.AdminPassword != c0.AdminPassword || c.CACert != c0.CACert {
			t.Fatalf("daemon %d made its own controller %s, daemon 0 %s", i+1, c.ControllerUUID, c0.ControllerUUID)
		}
	}
	// And there is one controller agent, one default model.
	st, err := client.NewModelAdmin(servers[1].Admin(t, "")).ListModels(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Models) != 2 {
		t.Fatalf("models %+v, want controller and default", st.Models)
	}
}

// TestHealthReportsTheStore: /health is ok while etcd answers and 503
// with the reason when it does not, and ok again after.
func TestHealthReportsTheStore(t *testing.T) {
	cluster := etcdtest.New(t)
	s := provisiondtest.Start(t, provisiondtest.WithEtcd(cluster.Endpoints(), ""),
		testkit.WithDaemonConfig(func(c *daemon.Config) { c.Etcd.RequestTimeout = time.Second }))
	if code, body := health(t, s); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/health = %d %q", code, body)
	}
	cluster.Stop(0)
	waitFor(t, "/health to report etcd down", func() bool {
		code, body := health(t, s)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "store unavailable: ")
	})
	if err := cluster.Restart(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/health ok again", func() bool {
		code, _ := health(t, s)
		return code == http.StatusOK
	})
}

func health(t *testing.T, s *provisiondtest.Server) (int, string) {
	t.Helper()
	resp, err := httpsClient(t, testkit.Daemon(s)).Get("https://" + s.Addr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// certOf returns the leaf certificate addr presents, as DER text.
func certOf(t *testing.T, addr, caPEM string) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(caPEM))
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return string(conn.ConnectionState().PeerCertificates[0].Raw)
}

// TestLoginServersOutlastAMomentWithoutRecords: an agent keeps the list of
// API servers its login gave it and, when its daemon goes, tries those
// alone. While no server's record can be read (every lease lost at once,
// the records not yet put again), a daemon gives the last list it read,
// not itself alone, which would strand its agents once it stopped; and
// a daemon whose own record is gone still lists itself, first.
func TestLoginServersOutlastAMomentWithoutRecords(t *testing.T) {
	a := startEtcd(t)
	b := provisiondtest.Start(t, provisiondtest.Join(a))
	both := sortedAddrs(a, b)
	agent := a.ControllerAgent(t, a.DefaultModel())
	if got := hostPortsOf(agent.LoginResult().Servers); !slices.Equal(got, both) {
		t.Fatalf("LoginResult.servers = %v, want %v", got, both)
	}
	ctx := ctxT(t)
	w, err := client.NewProvisioner(agent).WatchAPIHostPorts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	provisiondtest.Next(t, w) // the initial event

	endpoints, prefix := a.Etcd()
	raw, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// a's record first: b still listed, and a too, first.
	recs, err := raw.Get(ctx, prefix+"apiserver/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(a.Addr())
	deleted := 0
	for _, kv := range recs.Kvs {
		if strings.Contains(string(kv.Value), `"port":`+port+`}`) {
			if _, err := raw.Delete(ctx, string(kv.Key)); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	if deleted != 1 {
		t.Fatalf("%d records of a's among %d", deleted, len(recs.Kvs))
	}
	provisiondtest.Next(t, w)
	res := a.ControllerAgent(t, a.DefaultModel()).LoginResult()
	if got := hostPortsOf(res.Servers); !slices.Equal(got, both) {
		t.Fatalf("a's own record gone: LoginResult.servers = %v, want %v", got, both)
	}
	if first := res.Servers[0][0]; net.JoinHostPort(first.Value, strconv.Itoa(first.Port)) != a.Addr() {
		t.Errorf("a's own record gone: LoginResult.servers starts with %v, want %s", first, a.Addr())
	}
	// Then every record: the last list read.
	if _, err := raw.Delete(ctx, prefix+"apiserver/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	provisiondtest.Next(t, w)
	if got := hostPortsOf(a.ControllerAgent(t, a.DefaultModel()).LoginResult().Servers); !slices.Equal(got, both) {
		t.Fatalf("no record left: LoginResult.servers = %v, want the last list read, %v", got, both)
	}
}
