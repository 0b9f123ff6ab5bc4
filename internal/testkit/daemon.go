package testkit

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Start runs a daemon on a temp data dir and loopback port 0 through the
// test kit (stopped at cleanup, its log in the output of a failed test;
// with -v also on stderr at debug level); mod edits its configuration.
func Start(t testing.TB, mod func(*daemon.Config)) *daemon.Daemon {
	t.Helper()
	var opts []provisiondtest.Option
	if testing.Verbose() {
		opts = append(opts, provisiondtest.WithLogLevel(slog.LevelDebug), provisiondtest.WithLogOutput(os.Stderr))
	}
	if mod != nil {
		opts = append(opts, WithDaemonConfig(mod))
	}
	return Daemon(provisiondtest.Start(t, opts...))
}

// Ctx is a context for one test's calls: cancelled at its cleanup and
// after 20 s at the most.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Dial connects to model ("": /api) of d without logging in; the
// connection is closed at t's cleanup.
func Dial(t testing.TB, d *daemon.Daemon, model string) *client.Conn {
	t.Helper()
	creds := d.Credentials()
	c, err := client.Dial(Ctx(t), client.Config{Addr: d.Addr(), ModelUUID: model, CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// LoginAdmin is Dial logged in as the admin user.
func LoginAdmin(t testing.TB, d *daemon.Daemon, model string) *client.Conn {
	t.Helper()
	c := Dial(t, d, model)
	if _, err := c.LoginUser(Ctx(t), "admin", d.Credentials().AdminPassword); err != nil {
		t.Fatal(err)
	}
	return c
}

// LoginController is Dial logged in as the controller agent.
func LoginController(t testing.TB, d *daemon.Daemon, model string) *client.Conn {
	t.Helper()
	c := Dial(t, d, model)
	a := d.Credentials().ControllerAgent
	if _, err := c.LoginAgent(Ctx(t), a.Tag, a.Password, a.Nonce); err != nil {
		t.Fatal(err)
	}
	return c
}

// WantErr fails t unless err is a *params.Error with code and, when msg
// is not empty, message msg.
func WantErr(t testing.TB, err error, msg, code string) {
	t.Helper()
	var pe *params.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v; want %q (code %q)", err, msg, code)
	}
	if (msg != "" && pe.Message != msg) || pe.Code != code {
		t.Fatalf("error = %q (code %q); want %q (code %q)", pe.Message, pe.Code, msg, code)
	}
}

// WaitFor polls cond for up to 20 seconds and fails t when it does not
// hold by then.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Got holds what a typed client call returned: Got(c.M(ctx, args)).OK(t)
// is its value, failing the test on its error.
func Got[T any](v T, err error) Returned[T] { return Returned[T]{v, err} }

// Returned is a call's value and error; see Got.
type Returned[T any] struct {
	v   T
	err error
}

// OK is r's value; it fails t on r's error.
func (r Returned[T]) OK(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// Must fails t on err.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WantErrContaining is WantErr with a message fragment.
func WantErrContaining(t testing.TB, err error, msg, code string) {
	t.Helper()
	var pe *params.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v; want %q (code %q)", err, msg, code)
	}
	if !strings.Contains(pe.Message, msg) || pe.Code != code {
		t.Fatalf("error = %q (code %q); want %q (code %q)", pe.Message, pe.Code, msg, code)
	}
}

// ModelAdmin calls ModelAdmin v1.
func ModelAdmin(t testing.TB, c *client.Conn, method string, args, result any) error {
	t.Helper()
	return c.Call(Ctx(t), "ModelAdmin", 1, "", method, args, result)
}

// AdminCall is a ModelAdmin call that must succeed.
func AdminCall[R any](t testing.TB, c *client.Conn, method string, args any) R {
	t.Helper()
	var r R
	if err := ModelAdmin(t, c, method, args, &r); err != nil {
		t.Fatalf("%s(%+v): %v", method, args, err)
	}
	return r
}

// HTTPSTransport is an HTTP transport that trusts d's CA (its certificate
// names juju-apiserver, as Juju's does).
func HTTPSTransport(d *daemon.Daemon) *http.Transport {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(d.Credentials().CACert))
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"}}
}

// MetricsText GETs d's /metrics, with the headers hdr if not nil.
func MetricsText(t testing.TB, d *daemon.Daemon, hdr http.Header) string {
	t.Helper()
	tr := HTTPSTransport(d)
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+d.Addr()+"/metrics", nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s: %s", resp.Status, body)
	}
	return string(body)
}

// MetricValue is the sum of the samples of metric name in d's /metrics
// (0 when it has none).
func MetricValue(t testing.TB, d *daemon.Daemon, name string) float64 {
	t.Helper()
	sum := 0.0
	for _, line := range strings.Split(MetricsText(t, d, nil), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("metric %s: %q: %v", name, line, err)
		}
		sum += v
	}
	return sum
}

// SyncBuffer is a bytes.Buffer safe for concurrent use: a daemon's log
// (provisiondtest.WithLogOutput) read while the daemon writes it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
