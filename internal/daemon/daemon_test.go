package daemon_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

// The daemon's tests and the facades' share these helpers, from
// internal/testkit; short names here.
var (
	start           = testkit.Start
	ctxT            = testkit.Ctx
	dial            = testkit.Dial
	loginAdmin      = testkit.LoginAdmin
	loginController = testkit.LoginController
	wantErr         = testkit.WantErr

	wantErrContaining = testkit.WantErrContaining
	modelAdmin        = testkit.ModelAdmin

	ents    = testkit.Ents
	rawCall = testkit.RawCall
	isCode  = testkit.IsCode
)

// call and mustCall call the Provisioner (internal/testkit).
func call[R any](t *testing.T, c *client.Conn, v int, method string, args any) (R, error) {
	t.Helper()
	return testkit.Call[R](t, c, v, method, args)
}

func mustCall[R any](t *testing.T, c *client.Conn, v int, method string, args any) R {
	t.Helper()
	return testkit.MustCall[R](t, c, v, method, args)
}

// adminCall is a ModelAdmin call that must succeed (internal/testkit).
func adminCall[R any](t testing.TB, c *client.Conn, method string, args any) R {
	t.Helper()
	return testkit.AdminCall[R](t, c, method, args)
}

// provFixture is internal/testkit's ProvFixture (the Provisioner tests'
// model).
type provFixture = testkit.ProvFixture

var (
	newProvFixture     = testkit.NewProvFixture
	newProvFixtureWith = testkit.NewProvFixtureWith
)

const (
	m0Password = testkit.M0Password
	m0Nonce    = testkit.M0Nonce
	gitlabMeta = testkit.GitlabMeta
)

// newCAAS is internal/testkit's NewCAAS.
var newCAAS = testkit.NewCAAS

func TestRestartKeepsCredentials(t *testing.T) {
	dir := t.TempDir()
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d1, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := d1.Credentials()
	if err := d1.Shutdown(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, daemon.CredentialsFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v, mode %v", err, info.Mode())
	}
	d2, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Shutdown(ctxT(t))
	second := d2.Credentials()
	if first.ControllerUUID != second.ControllerUUID || first.AdminPassword != second.AdminPassword ||
		first.ControllerAgent != second.ControllerAgent || first.CACert != second.CACert {
		t.Fatalf("credentials changed across restart:\n%+v\n%+v", first, second)
	}
	loginAdmin(t, d2, second.DefaultModelUUID)
	loginController(t, d2, second.ControllerModelUUID)
}

func TestHealthAndMetrics(t *testing.T) {
	d := start(t, nil)
	loginAdmin(t, d, "")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"}}}
	defer hc.CloseIdleConnections()
	get := func(path string) string {
		resp, err := hc.Get("https://" + d.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return string(body)
	}
	if got := get("/health"); got != "ok\n" {
		t.Errorf("/health = %q", got)
	}
	m := get("/metrics")
	for _, want := range []string{"provisiond_connections 1", `provisiond_logins_total{outcome="ok"} 1`,
		`provisiond_requests_total{code="ok",facade="Admin",method="Login"} 1`, "provisiond_watchers", "provisiond_commit_duration_seconds_bucket",
		`provisiond_sched_latency_seconds_bucket{le="+Inf"}`, "provisiond_shedding 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestTLSRefusesOldVersions(t *testing.T) {
	d := start(t, nil)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	conn, err := tls.Dial("tcp", d.Addr(), &tls.Config{RootCAs: pool, ServerName: "juju-apiserver", MaxVersion: tls.VersionTLS11})
	if err == nil {
		conn.Close()
		t.Fatal("TLS 1.1 handshake succeeded")
	}
	conn, err = tls.Dial("tcp", d.Addr(), &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"})
	if err != nil {
		t.Fatalf("TLS with the CA and name juju-apiserver: %v", err)
	}
	conn.Close()
}

// Many connections and calls at once: no error, and every reply matched.
func TestConcurrentAgents(t *testing.T) {
	d := start(t, nil)
	uuid := d.Credentials().DefaultModelUUID
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		c := loginController(t, d, uuid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				var res params.StringResult
				if err := c.Call(ctxT(t), "Provisioner", 11, "", "ModelUUID", nil, &res); err != nil || res.Result != uuid {
					t.Errorf("ModelUUID = %+v, %v", res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestMain(m *testing.M) { leaktest.Main(m) }

func TestLoginTimeout(t *testing.T) {
	// Long enough for most logins (a slow password hash, under -race on a
	// busy machine) to finish within it; a try that does not is repeated.
	const loginTimeout = time.Second
	d := start(t, func(c *daemon.Config) { c.LoginTimeout = loginTimeout })
	idle := dial(t, d, "")
	// A connection that logged in within the timeout outlives it. Under
	// load a login can take longer than the timeout, and then the timer
	// rightly closes the connection: such a try proves nothing (the client
	// saw the login end later than the timeout after it began to dial,
	// which is before the server armed the timer) and is made again.
	var user *client.Conn
	for try := 1; user == nil; try++ {
		if try > 10 {
			t.Fatalf("no login ended within the login timeout %v in 10 tries", loginTimeout)
		}
		began := time.Now()
		c := dial(t, d, "")
		_, err := c.LoginUser(ctxT(t), "admin", d.Credentials().AdminPassword)
		took := time.Since(began)
		if err == nil && took < loginTimeout {
			user = c
			break
		}
		t.Logf("try %d: login took %v (timeout %v): %v", try, took, loginTimeout, err)
		c.Close()
	}
	select {
	case <-idle.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("connection without login was not closed")
	}
	if code := idle.CloseCode(); code != websocket.ClosePolicyViolation {
		t.Errorf("close code = %d; want 1008", code)
	}
	// A logged-in connection outlives the login timeout.
	deadline := time.After(loginTimeout + 250*time.Millisecond)
	for {
		if err := user.Ping(ctxT(t)); err != nil {
			t.Fatalf("logged-in connection: %v", err)
		}
		select {
		case <-deadline:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
