package daemon_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

// The dashboard as the daemon serves it (its own tests are in
// internal/dashboard): on the API port, through the daemon's login
// throttle, with the daemon's figures, and ended by its shutdown.

type dashClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newDashClient(t *testing.T, srv *provisiondtest.Server) *dashClient {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(srv.Credentials().CACert)) {
		t.Fatal("no CA certificate in the credentials")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver"}}
	t.Cleanup(tr.CloseIdleConnections)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &dashClient{t: t, base: "https://" + srv.Addr(), hc: &http.Client{Transport: tr, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *dashClient) do(ctx context.Context, method, path string, form url.Values) *http.Response {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

var dashToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login returns the status of the form's POST.
func (c *dashClient) login(user, password string) int {
	c.t.Helper()
	resp := c.do(c.t.Context(), http.MethodGet, "/dashboard/login", nil)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := dashToken.FindSubmatch(page)
	if m == nil {
		c.t.Fatalf("the login form: %s\n%s", resp.Status, page)
	}
	resp = c.do(c.t.Context(), http.MethodPost, "/dashboard/login",
		url.Values{"csrf": {string(m[1])}, "user": {user}, "password": {password}})
	resp.Body.Close()
	return resp.StatusCode
}

func TestDashboardSharesTheLoginThrottle(t *testing.T) {
	clock := watchertest.NewFakeClock(time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC))
	srv := provisiondtest.Start(t, provisiondtest.WithClock(clock),
		provisiondtest.WithLimits(provisiondtest.Limits{LoginFailures: 2}))
	creds := srv.Credentials()
	c := newDashClient(t, srv)
	for i := range 3 { // the free failures, and the one that starts the wait
		if got := c.login("admin", "guess"); got != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, got)
		}
	}
	// The next waits, even with the right password; so does the API's
	// user login from the same address: one throttle.
	if got := c.login("admin", creds.AdminPassword); got != http.StatusTooManyRequests {
		t.Fatalf("a login after the free failures: %d, want 429", got)
	}
	conn := srv.Dial(t, "")
	if _, err := conn.LoginUser(t.Context(), "admin", creds.AdminPassword); !errors.Is(err, client.ErrTryAgain) {
		t.Errorf("the API's login after the dashboard's failures: %v, want try again", err)
	}
	clock.Advance(time.Second)
	if got := c.login("admin", creds.AdminPassword); got != http.StatusSeeOther {
		t.Fatalf("after the wait: %d, want 303", got)
	}
}

func TestDashboardFollowsTheDaemon(t *testing.T) {
	srv := provisiondtest.Start(t)
	c := newDashClient(t, srv)
	if resp := c.do(t.Context(), http.MethodGet, "/dashboard", nil); resp.StatusCode/100 != 3 ||
		resp.Header.Get("Location") != "/dashboard/" {
		t.Errorf("GET /dashboard = %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	if got := c.login("admin", srv.Credentials().AdminPassword); got != http.StatusSeeOther {
		t.Fatalf("login: %d", got)
	}
	lines, next := c.stream("")
	next("event: status")

	// An agent logs in: the chart's agents count it (and /metrics does).
	srv.ControllerAgent(t, srv.DefaultModel())
	for {
		next("event: metrics")
		if l := next("data: "); strings.Contains(l, `"agents":1`) {
			break
		}
	}

	// The daemon shuts down with the stream open: the stream says so and
	// ends, and the shutdown does not wait for the client.
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("shutdown with an open stream took %v", time.Since(start).Round(time.Millisecond))
	next("event: bye")
	if l := next("data: "); !strings.Contains(l, `"shutdown"`) {
		t.Errorf("bye %s, want shutdown", l)
	}
	for range lines {
	}
}

// stream opens the event stream of model (a name; "" the default) and
// returns its lines and a bounded wait for the next line with a prefix.
func (c *dashClient) stream(model string) (<-chan string, func(prefix string) string) {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	resp := c.do(ctx, http.MethodGet, "/dashboard/events?model="+url.QueryEscape(model), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	t.Cleanup(func() { resp.Body.Close() })
	lines := make(chan string, 256)
	go func() { // ends with the body
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(prefix string) string {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the stream ended before %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-timeout:
				t.Fatalf("no %q within 10 s", prefix)
			}
		}
	}
	return lines, next
}

// In etcd mode every daemon of the controller serves the same page: a
// change made through one daemon reaches another's dashboard, which reads
// only its own state and hub. Sessions are each daemon's own.
func TestDashboardOnEveryDaemonOfAnEtcdController(t *testing.T) {
	a := provisiondtest.Start(t, provisiondtest.WithStore(provisiondtest.StoreEtcd))
	b := provisiondtest.Start(t, provisiondtest.Join(a))
	password := a.Credentials().AdminPassword
	cb := newDashClient(t, b)
	if got := cb.login("admin", password); got != http.StatusSeeOther {
		t.Fatalf("login on the second daemon: %d", got)
	}
	_, next := cb.stream("default")
	next("event: status")

	added, err := client.NewModelAdmin(a.Admin(t, a.DefaultModel())).AddMachines(t.Context(), params.AddMachinesArgs{})
	if err != nil {
		t.Fatal(err)
	}
	next("event: activity")
	if l := next("data: "); !strings.Contains(l, `"kind":"machine","id":"`+added.Machines[0]+`"`) {
		t.Errorf("the second daemon's feed: %s", l)
	}
	next("event: status")
	if l := next("data: "); !strings.Contains(l, `"id":"`+added.Machines[0]+`"`) {
		t.Errorf("the second daemon's status: %.300s", l)
	}

	// b's session cookie opens nothing on a.
	ca := newDashClient(t, a)
	u, _ := url.Parse(ca.base)
	ub, _ := url.Parse(cb.base)
	ca.hc.Jar.SetCookies(u, cb.hc.Jar.Cookies(ub))
	if resp := ca.do(t.Context(), http.MethodGet, "/dashboard/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the second daemon's session on the first: %s, want 303 to the form", resp.Status)
	}
}
