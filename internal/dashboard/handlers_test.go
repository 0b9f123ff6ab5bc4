package dashboard

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/facades/modeladmin"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/watcher"

	_ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" // WithStore(StoreEtcd)
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// The handler tests run the dashboard on a real state (bbolt in a temp
// dir), its real hub and a real TLS server; only the sessions' clock is
// the test's.

const adminPassword = "admin-password-of-enough-length"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type world struct {
	t     *testing.T
	st    *state.State
	init  state.InitResult
	dash  *Dashboard
	srv   *httptest.Server
	clock *clock
	// presence is who is connected, as the daemon's sessions record it.
	presence *presence.Recorder
}

func newWorld(t *testing.T, tweak func(*Config)) *world {
	t.Helper()
	hub := watcher.NewHub()
	st, err := statetest.OpenBolt(filepath.Join(t.TempDir(), "state.db"), state.Options{Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	res, err := st.Initialize(t.Context(), state.InitArgs{AdminPassword: adminPassword,
		AgentPassword: "controller-agent-password", AgentNonce: "user-admin:bootstrap"})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, st: st, init: res, clock: &clock{t: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}}
	w.presence = presence.New(w.clock.now, false)
	cfg := Config{
		State: st,
		Hub:   hub,
		Status: func(ctx context.Context, m state.Model) (params.ModelStatus, error) {
			return modeladmin.StatusOf(ctx, st, w.presence, m)
		},
		Pools: func(ctx context.Context, m state.Model) ([]params.StoragePoolInfo, error) {
			return modeladmin.StoragePoolsOf(ctx, st, m)
		},
		History: func(ctx context.Context, args params.HistoryArgs) (params.HistoryResult, error) {
			// As the daemon's: the oldest kept, from the store's figures.
			res, err := modeladmin.HistoryOf(ctx, st, args)
			if hs, serr := st.OldestHistory(ctx); err == nil && serr == nil && hs.Oldest > 0 {
				res.OldestRevision, res.OldestTime = hs.Oldest, hs.OldestTime.UTC().Format(time.RFC3339Nano)
			}
			return res, err
		},
		OnPresence: w.presence.OnChange,
		Now:        w.clock.now,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	if w.dash, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	w.srv = httptest.NewUnstartedServer(w.dash.Handler())
	w.srv.Config.RegisterOnShutdown(w.dash.Close)
	w.srv.StartTLS()
	t.Cleanup(func() { w.dash.Close(); w.srv.Close() })
	return w
}

// client is a browser: it keeps cookies by hand (so the test sees their
// attributes) and never follows redirects.
type client struct {
	w       *world
	hc      *http.Client
	cookies map[string]*http.Cookie
	header  http.Header // sent with every request
}

func (w *world) client() *client {
	tr := w.srv.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: w.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	w.t.Cleanup(tr.CloseIdleConnections)
	return &client{w: w, cookies: map[string]*http.Cookie{}, header: http.Header{},
		hc: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(ctx context.Context, method, path string, form url.Values) *http.Response {
	c.w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.w.srv.URL+path, body)
	if err != nil {
		c.w.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	for _, ck := range c.cookies {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.w.t.Fatalf("%s %s: %v", method, path, err)
	}
	for _, ck := range resp.Cookies() {
		if ck.MaxAge < 0 {
			delete(c.cookies, ck.Name)
		} else {
			c.cookies[ck.Name] = ck
		}
	}
	return resp
}

func (c *client) get(path string) (*http.Response, string) {
	c.w.t.Helper()
	resp := c.do(c.w.t.Context(), http.MethodGet, path, nil)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (c *client) post(path string, form url.Values) (*http.Response, string) {
	c.w.t.Helper()
	resp := c.do(c.w.t.Context(), http.MethodPost, path, form)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login fills the form as a browser does: GET it, POST it with its token.
func (c *client) login(user, password string) (*http.Response, string) {
	c.w.t.Helper()
	_, page := c.get("/dashboard/login")
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		c.w.t.Fatalf("login form without a token:\n%s", page)
	}
	return c.post("/dashboard/login", url.Values{"csrf": {m[1]}, "user": {user}, "password": {password}})
}

func (c *client) mustLogin() {
	c.w.t.Helper()
	if resp, body := c.login("admin", adminPassword); resp.StatusCode != http.StatusSeeOther {
		c.w.t.Fatalf("login: %s\n%s", resp.Status, body)
	}
}

// pageToken is the logout token of the page.
func (c *client) pageToken() string {
	c.w.t.Helper()
	resp, page := c.get("/dashboard/")
	m := csrfField.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		c.w.t.Fatalf("the page: %s\n%s", resp.Status, page)
	}
	return m[1]
}

// refused checks that c gets no content: the page sends it to the form,
// the script and the stream answer 401.
func (c *client) refused(why string) {
	c.w.t.Helper()
	if resp, body := c.get("/dashboard/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login" ||
		strings.Contains(body, "logout") {
		c.w.t.Errorf("%s: GET /dashboard/ = %s to %q; want 303 to the login form", why, resp.Status, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/dashboard/events", "/dashboard/static/app.js", "/dashboard/history?kind=machine&id=0"} {
		if resp, _ := c.get(p); resp.StatusCode != http.StatusUnauthorized {
			c.w.t.Errorf("%s: GET %s = %s, want 401", why, p, resp.Status)
		}
	}
}

func TestNoSessionNoContent(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	c.refused("no cookie")
	for _, p := range []string{"/dashboard/static/app.css", "/dashboard/static/icon.svg", "/dashboard/login"} {
		if resp, _ := c.get(p); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %s; the login form needs it", p, resp.Status)
		}
	}
	if resp, _ := c.get("/dashboard/nothing-here"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET an unknown path = %s", resp.Status)
	}
}

func TestBadSession(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	for _, v := range []string{"", "x", randomToken(), strings.Repeat("A", 4000)} {
		c.cookies[sessionCookie] = &http.Cookie{Name: sessionCookie, Value: v}
		c.refused(fmt.Sprintf("session cookie %.10q", v))
	}
	// A real session's token under another name, or a session's CSRF
	// token as its cookie, opens nothing either.
	good := w.client()
	good.mustLogin()
	c.cookies = map[string]*http.Cookie{"provisiond-session": {Name: "provisiond-session", Value: good.cookies[sessionCookie].Value}}
	c.refused("the token under another cookie name")
	c.cookies = map[string]*http.Cookie{sessionCookie: {Name: sessionCookie, Value: good.pageToken()}}
	c.refused("the CSRF token as the session")
}

func TestLoginSetsAStrictCookie(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	resp, body := c.login("admin", adminPassword)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/" {
		t.Fatalf("login = %s to %q\n%s", resp.Status, resp.Header.Get("Location"), body)
	}
	ck := c.cookies[sessionCookie]
	if ck == nil {
		t.Fatalf("no %s cookie in %v", sessionCookie, resp.Header["Set-Cookie"])
	}
	if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Domain != "" ||
		ck.MaxAge != int(DefaultSessionLifetime/time.Second) || len(ck.Value) < 43 {
		t.Errorf("session cookie %+v: want Secure, HttpOnly, SameSite=Strict, Path=/, no Domain, Max-Age of the lifetime, 256 bits", ck)
	}
	if _, ok := c.cookies[csrfCookie]; ok {
		t.Error("the login form's token cookie outlived the login")
	}
	resp, page := c.get("/dashboard/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `action="/dashboard/logout"`) {
		t.Fatalf("the page with a session: %s\n%s", resp.Status, page)
	}
	if resp, _ := c.get("/dashboard/static/app.js"); resp.StatusCode != http.StatusOK ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js with a session: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	// A logged-in browser going to the form goes to the page.
	if resp, _ := c.get("/dashboard/login"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the form with a session: %s", resp.Status)
	}
}

func TestWrongPasswordRefused(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	for _, tc := range []struct{ user, password string }{
		{"admin", "wrong"}, {"nobody", adminPassword}, {"", adminPassword}, {"admin", ""},
		{"user-admin@external", adminPassword}, {"../../admin", adminPassword},
	} {
		resp, body := c.login(tc.user, tc.password)
		if resp.StatusCode != http.StatusUnauthorized || c.cookies[sessionCookie] != nil {
			t.Errorf("login %q/%q = %s, cookie %v; want 401 and none", tc.user, tc.password, resp.Status, c.cookies[sessionCookie])
		}
		if strings.Contains(body, tc.password) && tc.password != "" {
			t.Errorf("the refused form echoes the password")
		}
	}
	// The tag form of the user is the user.
	if resp, body := c.login("user-admin", adminPassword); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("login as user-admin = %s\n%s", resp.Status, body)
	}
}

func TestSessionExpires(t *testing.T) {
	w := newWorld(t, func(c *Config) { c.SessionLifetime = time.Hour; c.SessionIdle = 10 * time.Minute })
	c := w.client()
	c.mustLogin()
	// Seen every 9 minutes it stays, up to its lifetime.
	for range 6 {
		w.clock.add(9 * time.Minute)
		c.pageToken()
	}
	w.clock.add(7 * time.Minute) // 61 minutes after the login
	c.refused("past the session's lifetime")

	c.mustLogin()
	w.clock.add(10 * time.Minute)
	c.refused("idle for the idle time")
	if n, _ := w.dash.sessions.counts(); n != 0 {
		t.Errorf("%d sessions left after both expired", n)
	}
}

func TestAgentsCannotLogIn(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	// The controller agent's own credentials, by its tag.
	resp, body := c.login("machine-0", "controller-agent-password")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Agents cannot log in") {
		t.Errorf("login as machine-0 = %s\n%s", resp.Status, body)
	}
	// As a user of that name, or another agent kind: no.
	for _, name := range []string{"user-machine-0", "unit-db-0", "application-db", "controller-" + w.init.ControllerUUID} {
		if resp, _ := c.login(name, "controller-agent-password"); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("login as %s = %s", name, resp.Status)
		}
	}
	if c.cookies[sessionCookie] != nil {
		t.Error("an agent's login set a session cookie")
	}
	c.refused("after the agents' logins")
}

func TestLoginCSRF(t *testing.T) {
	w := newWorld(t, nil)
	form := func(token string) url.Values {
		return url.Values{"csrf": {token}, "user": {"admin"}, "password": {adminPassword}}
	}
	// No token at all (a cross-site form cannot read the cookie's).
	c := w.client()
	if resp, _ := c.post("/dashboard/login", form("")); resp.StatusCode != http.StatusForbidden || c.cookies[sessionCookie] != nil {
		t.Errorf("login without a token = %s", resp.Status)
	}
	// A token of its own, without the cookie's.
	c = w.client()
	if resp, _ := c.post("/dashboard/login", form(randomToken())); resp.StatusCode != http.StatusForbidden {
		t.Errorf("login with a made-up token = %s", resp.Status)
	}
	// The cookie's token, but the form's says otherwise.
	c = w.client()
	c.get("/dashboard/login")
	if resp, _ := c.post("/dashboard/login", form(randomToken())); resp.StatusCode != http.StatusForbidden {
		t.Errorf("login with another token than the cookie's = %s", resp.Status)
	}
	// A good token from another origin: the browser says so, and it is
	// refused before anything else.
	for _, h := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Origin": {"https://attacker.example"}},
	} {
		c = w.client()
		c.header = h
		if resp, _ := c.login("admin", adminPassword); resp.StatusCode != http.StatusForbidden || c.cookies[sessionCookie] != nil {
			t.Errorf("login with %v = %s", h, resp.Status)
		}
	}
	// The same-origin browser gets in.
	c = w.client()
	c.header = http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {w.srv.URL}}
	c.mustLogin()
}

func TestLogoutCSRF(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	c.mustLogin()
	token := c.pageToken()
	for _, tc := range []struct {
		name   string
		header http.Header
		token  string
	}{
		{"no token", nil, ""},
		{"another token", nil, randomToken()},
		{"from another site", http.Header{"Sec-Fetch-Site": {"cross-site"}}, token},
	} {
		c.header = tc.header
		if resp, _ := c.post("/dashboard/logout", url.Values{"csrf": {tc.token}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("logout, %s = %s, want 403", tc.name, resp.Status)
		}
		c.header = nil
		c.pageToken() // still logged in
	}
	resp, _ := c.post("/dashboard/logout", url.Values{"csrf": {token}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard/login?ended=logout" {
		t.Errorf("logout = %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	c.refused("after logout")
	_, form := c.get("/dashboard/login?ended=logout")
	if !strings.Contains(form, "You have logged out.") {
		t.Error("the form does not say the user logged out")
	}
}

func TestSessionsPerUserBounded(t *testing.T) {
	w := newWorld(t, func(c *Config) { c.MaxSessionsPerUser = 2; c.MaxSessions = 3 })
	a, b, c := w.client(), w.client(), w.client()
	a.mustLogin()
	b.mustLogin()
	c.mustLogin() // the third ends the oldest
	a.refused("the user's oldest session, after a third login")
	b.pageToken()
	c.pageToken()

	if _, err := w.st.AddUser(t.Context(), "bob", "", "bob-password-long-enough", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	d := w.client()
	if resp, _ := d.login("bob", "bob-password-long-enough"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's login: %s", resp.Status)
	}
	e := w.client()
	if resp, body := e.login("bob", "bob-password-long-enough"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a login over MaxSessions = %s\n%s", resp.Status, body)
	}
}

// stream reads a text/event-stream.
type stream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	events chan event
}

type event struct {
	name string
	data json.RawMessage
}

func (c *client) stream(query string) *stream {
	c.w.t.Helper()
	ctx, cancel := context.WithCancel(c.w.t.Context())
	resp := c.do(ctx, http.MethodGet, "/dashboard/events"+query, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		resp.Body.Close()
		c.w.t.Fatalf("stream: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	s := &stream{t: c.w.t, resp: resp, cancel: cancel, events: make(chan event, 1024)}
	go func() { // ends with the body: the server ends it or cancel does
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = json.RawMessage(line[len("data: "):])
			case line == "" && ev.name != "":
				s.events <- ev
				ev = event{}
			}
		}
	}()
	c.w.t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s
}

// eventWait bounds the tests' waits for a stream's events and the
// dashboard's state. It is generous: a wait ends as soon as what it waits
// for happens, and on a loaded 2-core box running other packages' race
// tests (and this package's chromium) beside it an event has taken more
// than 10 s.
const eventWait = time.Minute

// next returns the next event named name, skipping others, within
// eventWait. If none comes it fails, naming the events it skipped.
func (s *stream) next(name string) json.RawMessage {
	s.t.Helper()
	start := time.Now()
	timeout := time.After(eventWait)
	var skipped []string
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatalf("the stream ended before a %q event (skipped %v)", name, skipped)
			}
			if ev.name == name {
				return ev.data
			}
			skipped = append(skipped, ev.name)
		case <-timeout:
			s.t.Fatalf("no %q event within %v (skipped %v)", name, time.Since(start).Round(time.Millisecond), skipped)
		}
	}
}

// ends checks that the stream says bye for reason, then ends.
func (s *stream) ends(reason string) {
	s.t.Helper()
	var bye struct{ Reason string }
	if err := json.Unmarshal(s.next("bye"), &bye); err != nil || bye.Reason != reason {
		s.t.Errorf("bye %+v (%v), want reason %q", bye, err, reason)
	}
	timeout := time.After(eventWait)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-timeout:
			s.t.Fatalf("the stream did not end within %v of its bye", eventWait)
		}
	}
}

func statusOf(t *testing.T, data json.RawMessage) snapshot {
	t.Helper()
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStreamFollowsChanges(t *testing.T) {
	w := newWorld(t, nil)
	c := w.client()
	c.mustLogin()
	s := c.stream("")
	var hello struct {
		User, Model, Controller string
		Superuser               bool
	}
	if err := json.Unmarshal(s.next("hello"), &hello); err != nil || hello.User != "admin" || !hello.Superuser ||
		hello.Model != w.init.DefaultModelUUID || hello.Controller != w.init.ControllerUUID {
		t.Fatalf("hello %+v %v", hello, err)
	}
	var models []modelInfo
	if err := json.Unmarshal(s.next("models"), &models); err != nil || len(models) != 2 {
		t.Fatalf("models %+v %v", models, err)
	}
	if st := statusOf(t, s.next("status")); st.Status == nil || len(st.Status.Machines) != 0 || st.Model.Name != "default" {
		t.Fatalf("first status %+v", st)
	}

	// A machine added in state reaches the stream: the feed, then the
	// model as status shows it, with the new machine pending.
	if _, err := w.st.AddMachine(t.Context(), w.init.DefaultModelUUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	var act struct {
		Changes []change
		Lost    bool
	}
	if err := json.Unmarshal(s.next("activity"), &act); err != nil || len(act.Changes) == 0 ||
		act.Changes[0].Kind != "machine" || act.Changes[0].ID != "0" || !slicesContains(act.Changes[0].Fields, "created") {
		t.Fatalf("activity %+v %v", act, err)
	}
	st := statusOf(t, s.next("status"))
	if len(st.Status.Machines) != 1 || st.Status.Machines[0].ID != "0" {
		t.Fatalf("status after AddMachine: %+v", st.Status.Machines)
	}
	if len(st.Alerts) != 1 || st.Alerts[0].Kind != "machine" || st.Alerts[0].Status != "pending" {
		t.Errorf("alerts %v, want machine 0 pending", st.Alerts)
	}

	// A new model reaches the model list.
	if _, err := w.st.AddModel(t.Context(), "k8s", state.ModelTypeCAAS, nil); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s.next("models"), &models); err != nil || len(models) != 3 {
		t.Fatalf("models after AddModel %+v %v", models, err)
	}

	// A second page of the model gets the feed's last changes at once.
	s2 := c.stream("?model=default")
	if err := json.Unmarshal(s2.next("activity"), &act); err != nil || len(act.Changes) == 0 {
		t.Fatalf("a new stream's activity %+v %v", act, err)
	}
	if resp, _ := c.get("/dashboard/events?model=no-such-model"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a stream of an unknown model = %s", resp.Status)
	}
}

// A change made while a stream is starting (here while its first history
// read runs, after its first status was read) still brings a status that
// shows it: the stream takes the feed's changes before it reads the
// status, so the change wakes its loop rather than going out as activity
// with no status after it.
func TestStreamStatusFollowsAChangeAsItStarts(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	w := newWorld(t, func(c *Config) {
		read := c.History
		c.History = func(ctx context.Context, args params.HistoryArgs) (params.HistoryResult, error) {
			first.Do(func() {
				close(entered)
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
			return read(ctx, args)
		}
	})
	c := w.client()
	c.mustLogin()
	s := c.stream("")
	if st := statusOf(t, s.next("status")); len(st.Status.Machines) != 0 {
		t.Fatalf("first status %+v", st.Status.Machines)
	}
	select {
	case <-entered:
	case <-time.After(eventWait):
		t.Fatalf("the stream read no history within %v", eventWait)
	}
	if _, err := w.st.AddMachine(t.Context(), w.init.DefaultModelUUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the feed to hold the new machine", func() bool {
		w.dash.feed.mu.Lock()
		defer w.dash.feed.mu.Unlock()
		r := w.dash.feed.rings[w.init.DefaultModelUUID]
		return r != nil && r.seq > 0
	})
	close(release)
	if st := statusOf(t, s.next("status")); len(st.Status.Machines) != 1 || st.Status.Machines[0].ID != "0" {
		t.Fatalf("the status after the change: %+v", st.Status.Machines)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestStreamEnds(t *testing.T) {
	w := newWorld(t, func(c *Config) { c.MaxStreamsPerSession = 2 })
	c := w.client()
	c.mustLogin()

	// The client goes: the stream's goroutine returns.
	s := c.stream("")
	s.next("status")
	s.cancel()
	leaktest.WaitAtMost(t, 0, "dashboard.(*Dashboard).events")
	waitFor(t, "the stream's slot to be given back", func() bool { _, n := w.dash.sessions.counts(); return n == 0 })

	// A third stream of a session ends its oldest.
	s1, s2 := c.stream(""), c.stream("")
	s1.next("status")
	s2.next("status")
	s3 := c.stream("")
	s1.ends(reasonStreams)
	s3.next("status")

	// Logout ends the session's streams.
	c.post("/dashboard/logout", url.Values{"csrf": {c.pageToken()}})
	s2.ends(reasonLogout)
	s3.ends(reasonLogout)

	// The user's password changes: the session ends, and its cookie with it.
	c.mustLogin()
	s = c.stream("")
	s.next("status")
	if err := w.st.SetUserPassword(t.Context(), "admin", "another-password-long-enough"); err != nil {
		t.Fatal(err)
	}
	s.ends(reasonCredentials)
	c.refused("after the password changed")

	// The session expires under an open stream: it notices on its tick.
	c.login("admin", "another-password-long-enough")
	s = c.stream("")
	s.next("status")
	w.clock.add(DefaultSessionLifetime)
	s.ends(reasonExpired)

	// Close (the daemon's shutdown) ends every stream.
	c.login("admin", "another-password-long-enough")
	s = c.stream("")
	s.next("status")
	w.dash.Close()
	s.ends(reasonShutdown)
	leaktest.WaitAtMost(t, 0, "dashboard.(*Dashboard).events")
	c.refused("after Close")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, eventWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestUsersWithoutModelAccessSeeNoModels(t *testing.T) {
	w := newWorld(t, nil)
	if _, err := w.st.AddUser(t.Context(), "bob", "", "bob-password-long-enough", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	c := w.client()
	if resp, _ := c.login("bob", "bob-password-long-enough"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("bob's login: %s", resp.Status)
	}
	_, page := c.get("/dashboard/")
	if !strings.Contains(page, "no access to models") {
		t.Error("the page does not tell bob why he sees no models")
	}
	s := c.stream("?model=default")
	var hello struct{ Superuser bool }
	json.Unmarshal(s.next("hello"), &hello)
	if models := string(s.next("models")); hello.Superuser || models != "[]\n" && models != "[]" {
		t.Errorf("bob: superuser %v, models %s", hello.Superuser, models)
	}
	if _, err := w.st.AddMachine(t.Context(), w.init.DefaultModelUUID, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	// bob's stream is woken by no model's changes (as watchers' NoNext,
	// a short look).
	select {
	case ev := <-s.events:
		if ev.name == "status" || ev.name == "activity" {
			t.Errorf("bob got %s %s", ev.name, ev.data)
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// TestStreamBannerFollowsPresence: a model with a machine waiting and no
// provisioner agent connected shows the banner; the controller agent
// connecting at the model's endpoint (as the daemon's sessions record
// it) sends a fresh snapshot without it, its going one with it again,
// down since it went.
func TestStreamBannerFollowsPresence(t *testing.T) {
	w := newWorld(t, nil)
	model := w.init.DefaultModelUUID
	if _, err := w.st.AddMachine(t.Context(), model, state.MachineParams{}); err != nil {
		t.Fatal(err)
	}
	c := w.client()
	c.mustLogin()
	s := c.stream("")
	st := statusOf(t, s.next("status"))
	const want = "No provisioner agent is connected to this model, and it has work waiting: 1 machine to start."
	if st.Banner == nil || st.Banner.Message != want || st.Banner.Since != "" {
		t.Fatalf("banner before any agent: %+v, want %q with no time", st.Banner, want)
	}
	provisioner := presence.Agent{Model: model, Provisioner: true}
	w.presence.Connect(provisioner)
	if st := statusOf(t, s.next("status")); st.Banner != nil || st.Status.ProvisionerAgent == nil || st.Status.ProvisionerAgent.Status != "alive" {
		t.Fatalf("after the provisioner connected: banner %+v, provisioner %+v", st.Banner, st.Status.ProvisionerAgent)
	}
	w.clock.add(time.Minute)
	w.presence.Disconnect(provisioner)
	st = statusOf(t, s.next("status"))
	if st.Banner == nil || st.Banner.Message != want || st.Banner.Since != "2026-01-02T15:05:05Z" {
		t.Fatalf("after the provisioner went: banner %+v, want %q since it went", st.Banner, want)
	}
}
