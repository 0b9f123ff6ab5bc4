package daemon_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/asuser"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Connections and logins under attack (docs/reliability.md, "Connections
// and logins under attack"): each test replays an attack of the outside
// attack run against the in-process daemon and checks that the attack no
// longer works and that the legitimate client gets in. The failed-login
// throttle runs on the fixture's fake clock. Tests that need a local
// client of another user open its sockets through internal/asuser, which
// needs root; they skip otherwise.

// guessLogin logs in on c (which may have failed logins before) as a user
// or an agent, and sorts the outcome: checked (a wrong password or an
// unknown entity), throttled ("too many failed logins"), ok, or closed
// (the connection ended: --login-timeout ends one that never logs in).
func guessLogin(t *testing.T, c *client.Conn, tag, password, nonce string) (outcome string) {
	t.Helper()
	var err error
	if name, ok := strings.CutPrefix(tag, "user-"); ok {
		_, err = c.LoginUser(ctxT(t), name, password)
	} else {
		_, err = c.LoginAgent(ctxT(t), tag, password, nonce)
	}
	switch {
	case err == nil:
		return "ok"
	case isCode(err, params.CodeUnauthorized):
		return "checked"
	case isCode(err, params.CodeTryAgain) && strings.HasPrefix(err.Error(), "too many failed logins; try again in "):
		return "throttled"
	case c.Err() != nil:
		return "closed"
	}
	t.Fatalf("login as %s: %v", tag, err)
	return ""
}

// guessOn is guessLogin on *c, which it replaces with a new connection to
// model when the old one has ended (--login-timeout ends a connection that
// never logs in, in real time): a guesser reconnects.
func guessOn(t *testing.T, d *daemon.Daemon, c **client.Conn, model, tag, password, nonce string) string {
	t.Helper()
	got := guessLogin(t, *c, tag, password, nonce)
	for got == "closed" {
		*c = dial(t, d, model)
		got = guessLogin(t, *c, tag, password, nonce)
	}
	return got
}

// Unknown-user logins on loopback at 5 a second do not keep the admin out
// (before: refused 18 times of 20 over 40 s, "too many failed logins; try
// again in 15s"): guesses at one name back off alone, guesses at fresh
// names are each checked (no hash: they cost the daemon a timer), and the
// admin, from the same loopback client, gets in every time.
func TestLoginGuessesKeepOthersIn(t *testing.T) {
	f := newProvFixtureWith(t, func(c *daemon.Config) { c.LoginFailures = 3 })
	creds := f.D.Credentials()
	for _, c := range []struct {
		what    string
		guesses int
		name    func(i int) string
	}{
		{"one unknown name", 200, func(int) string { return "nobody" }},
		{"fresh unknown names", 20, func(i int) string { return fmt.Sprintf("nobody-%d", i) }},
	} {
		t.Run(c.what, func(t *testing.T) {
			guesser := dial(t, f.D, "") // one connection: a failed login may be tried again
			outcomes := map[string]int{}
			refused := 0
			for i := range c.guesses { // 5 a second of the daemon's clock
				outcomes[guessOn(t, f.D, &guesser, "", "user-"+c.name(i), "guess", "")]++
				if i%5 == 0 { // the admin, every second
					a := dial(t, f.D, f.Model)
					if got := guessLogin(t, a, "user-admin", creds.AdminPassword, ""); got != "ok" {
						refused++
					}
					a.Close()
				}
				f.Clock.Advance(200 * time.Millisecond)
			}
			t.Logf("guesses: %v", outcomes)
			if refused != 0 {
				t.Errorf("the admin was refused %d times of %d", refused, c.guesses/5)
			}
			if c.guesses == 200 && outcomes["checked"] > 3+1+5 { // free, the next, then after 1, 2, 4, 8 and 16 s
				t.Errorf("%d guesses at one name checked in 40 s", outcomes["checked"])
			}
			f.Clock.Advance(time.Hour) // forget
		})
	}
}

// Wrong-password logins as machine-0 at a hosted model do not lock out
// the controller agent, whose tag is the same there (before: 39 of its 40
// logins refused over 40 s): the hosted model's machine-0 backs off, and
// the controller agent, keyed apart, still logs in at that model and at
// its own, every time. The hosted machine-0 itself, at the guesser's
// client, waits its turn (it cannot be told from the guesser).
func TestControllerAgentNotLockedOutOfHostedModel(t *testing.T) {
	f := newProvFixtureWith(t, func(c *daemon.Config) { c.LoginFailures = 3 })
	ctrl := f.D.Credentials().ControllerAgent
	guesser := dial(t, f.D, f.Model)
	outcomes := map[string]int{}
	refused := 0
	for i := range 200 {
		outcomes[guessOn(t, f.D, &guesser, f.Model, "machine-0", "wrong-password-0123456789", m0Nonce)]++
		if i%5 == 0 { // the controller agent, every second, at the hosted model and its own
			for _, model := range []string{f.Model, f.D.Credentials().ControllerModelUUID} {
				c := dial(t, f.D, model)
				if got := guessLogin(t, c, ctrl.Tag, ctrl.Password, ctrl.Nonce); got != "ok" {
					refused++
				}
				c.Close()
			}
		}
		f.Clock.Advance(200 * time.Millisecond)
	}
	t.Logf("guesses: %v", outcomes)
	if refused != 0 {
		t.Errorf("the controller agent was refused %d times of 80", refused)
	}
	if outcomes["throttled"] == 0 {
		t.Error("the guesses at the hosted model's machine-0 were never throttled")
	}
	if got := guessLogin(t, dial(t, f.D, f.Model), "machine-0", m0Password, m0Nonce); got != "throttled" {
		t.Errorf("machine-0 of the hosted model from the guesser's client: %s; want throttled", got)
	}
	f.Clock.Advance(time.Minute)
	if got := guessLogin(t, dial(t, f.D, f.Model), "machine-0", m0Password, m0Nonce); got != "ok" {
		t.Errorf("machine-0 of the hosted model after the longest wait: %s", got)
	}
}

// Guesses at one user from 150 addresses in 127.0.0.0/8 are throttled as
// from one client (before: 8 s, none throttled). With root, guesses from
// 40 local users (40 clients) are throttled by the user's own key across
// clients; the admin, the local operator, gets in throughout, and so does
// the user from a client it logged in from before.
func TestGuessesAcrossAddressesThrottled(t *testing.T) {
	f := newProvFixtureWith(t, func(c *daemon.Config) { c.LoginFailures = 3 })
	if _, err := f.St.AddUser(t.Context(), "bob", "Bob", "bob-password-0123456789", state.AccessLogin); err != nil {
		t.Fatal(err)
	}
	creds := f.D.Credentials()
	outcomes := map[string]int{}
	for i := range 150 {
		c, err := client.Dial(ctxT(t), client.Config{Addr: f.D.Addr(), CACert: []byte(creds.CACert),
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(i/200), byte(i%200+2))}})
		if err != nil {
			t.Fatal(err)
		}
		outcomes[guessLogin(t, c, "user-bob", "guess", "")]++
		c.Close()
	}
	t.Logf("150 guesses from 127.0.0.0/8: %v", outcomes)
	if outcomes["checked"] > 3+1 {
		t.Errorf("%d of 150 guesses checked; want at most 4", outcomes["checked"])
	}
	if !asuser.Supported() {
		t.Skip("guesses from other local users need root (internal/asuser)")
	}
	f.Clock.Advance(time.Hour)
	// bob logs in from a client of his own (uid 3000), then 40 other
	// local users guess.
	asBob := dialAs(t, f.D, 3000, "")
	if got := guessLogin(t, asBob, "user-bob", "bob-password-0123456789", ""); got != "ok" {
		t.Fatalf("bob: %s", got)
	}
	outcomes = map[string]int{}
	for i := range 40 {
		c := dialAs(t, f.D, uint32(3001+i), "")
		outcomes[guessLogin(t, c, "user-bob", "guess", "")]++
		c.Close()
		f.Clock.Advance(200 * time.Millisecond)
	}
	t.Logf("40 guesses from 40 local users: %v", outcomes)
	if outcomes["checked"] > 12+1+2 { // 12 free across clients, the next, then after 1 and 2 s
		t.Errorf("%d of 40 guesses from 40 clients checked", outcomes["checked"])
	}
	if got := guessLogin(t, dialAs(t, f.D, 3000, ""), "user-bob", "bob-password-0123456789", ""); got != "ok" {
		t.Errorf("bob from his own client: %s", got)
	}
	if got := guessLogin(t, dialAs(t, f.D, 3100, ""), "user-bob", "bob-password-0123456789", ""); got != "throttled" {
		t.Errorf("bob from a client new to him while his name is guessed at: %s; want throttled", got)
	}
	if got := guessLogin(t, dial(t, f.D, f.Model), "user-admin", creds.AdminPassword, ""); got != "ok" {
		t.Errorf("the admin: %s", got)
	}
}

// dialAs connects to d as local user uid (internal/asuser) without
// logging in; the connection is closed at cleanup.
func dialAs(t testing.TB, d *daemon.Daemon, uid uint32, model string) *client.Conn {
	t.Helper()
	c, err := tryDialAs(t, d, uid, model)
	if err != nil {
		t.Fatalf("dial as uid %d: %v", uid, err)
	}
	return c
}

func tryDialAs(t testing.TB, d *daemon.Daemon, uid uint32, model string) (*client.Conn, error) {
	var c *client.Conn
	err := asuser.Do(uid, func() error {
		var err error
		c, err = client.Dial(ctxT(t), client.Config{Addr: d.Addr(), ModelUUID: model, CACert: []byte(d.Credentials().CACert)})
		return err
	})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// One local user opening websockets that never log in, 300 with
// --max-connections 300, holds its share of connections that have not
// logged in, not the daemon (before: every admin login reset for 60 s,
// /metrics unreachable). The admin (the local operator) logs in, another
// local user connects, /metrics answers on the API port and on
// --metrics-addr; the refusals are counted by reason. Then many local
// users at once fill what all clients may hold before login: the
// operator still gets in, from the share of the cap kept for it.
func TestPendingConnectionsBounded(t *testing.T) {
	if !asuser.Supported() {
		t.Skip("local clients of other users need root (internal/asuser)")
	}
	d := start(t, func(c *daemon.Config) {
		c.MaxConns, c.MetricsAddr = 300, "127.0.0.1:0"
		c.LoginTimeout = 10 * time.Minute // the counts below hold however slow the box
	})
	creds := d.Credentials()
	const attacker = 65534
	flood := func(uid uint32, n int) (held []*client.Conn, refused int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 { // a few at once, as a client in a hurry
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n / 4 {
					c, err := tryDialAs(t, d, uid, "")
					mu.Lock()
					if err != nil {
						if !droppedConn(err) {
							t.Errorf("dial as %d: %v", uid, err)
						}
						refused++
					} else {
						held = append(held, c)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return held, refused
	}
	held, refused := flood(attacker, 300)
	t.Logf("uid %d: %d connections held, %d refused", attacker, len(held), refused)
	if len(held) != 18 { // a sixteenth of 300
		t.Errorf("one local user holds %d connections before login; want 18", len(held))
	}
	loginAdmin(t, d, creds.DefaultModelUUID)
	if _, err := tryDialAs(t, d, attacker-1, ""); err != nil {
		t.Errorf("another local user: %v", err)
	}
	for where, m := range map[string]string{"the API port": metricsText(t, d, nil), "--metrics-addr": scrape(t, "http://"+d.MetricsAddr()+"/metrics")} {
		if !strings.Contains(m, `provisiond_connections_refused_total{listener="api",reason="address"} 282`) {
			t.Errorf("/metrics on %s does not count 282 refusals for the address:\n%s", where, grepLines(m, "refused"))
		}
	}
	// 20 local users: 18 each would be 360; 150 (half the cap) may wait
	// for a login in all.
	var all []*client.Conn
	total := 0
	for i := range 20 {
		h, r := flood(uint32(4000+i), 20)
		all = append(all, h...)
		total += r
	}
	t.Logf("20 local users: %d connections held, %d refused", len(all), total)
	if n := len(all) + len(held) + 1; n != 150 {
		t.Errorf("%d connections before login in all; want 150", n)
	}
	if m := metricsText(t, d, nil); !strings.Contains(m, `provisiond_tcp_connections_pending 150`) ||
		strings.Contains(m, `reason="pending"} 0`) {
		t.Errorf("/metrics:\n%s", grepLines(m, "pending"))
	}
	loginAdmin(t, d, creds.DefaultModelUUID)
	// Logged in, a connection leaves its place to others.
	if _, err := all[0].LoginUser(ctxT(t), "admin", creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the logged-in connection to leave the pending ones", func() bool {
		return strings.Contains(metricsText(t, d, nil), "provisiond_tcp_connections_pending 149")
	})
	if _, err := tryDialAs(t, d, 5000, ""); err != nil {
		t.Errorf("a new local user after a login freed a place: %v", err)
	}
}

// The admin's login while 100 connections from 100 loopback addresses
// send logins as users who do not exist, as fast as they are answered
// (the attack run: 600 such logins took the admin's login from 0.04 s to
// 6.2 s of argon2 CPU). "admin" logs in again and again (its verification
// remembered); "fresh" is a user whose password is set anew before each
// login, so each is hashed. Reported: ms per login; no bound is asserted.
func BenchmarkLoginUnderGuessFlood(b *testing.B) {
	for _, flood := range []bool{false, true} {
		b.Run(map[bool]string{false: "idle", true: "flood"}[flood], func(b *testing.B) {
			d := start(b, nil)
			creds := d.Credentials()
			if _, err := d.State().AddUser(b.Context(), "carol", "", "carol-password-0", state.AccessSuperuser); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var guesses atomic.Int64
			if flood {
				for i := range 100 {
					cfg := client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert),
						LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(i+1))}}
					wg.Add(1)
					go func() {
						defer wg.Done()
						var c *client.Conn
						for j := 0; ctx.Err() == nil; j++ {
							if c == nil { // (again: --login-timeout closes it)
								var err error
								if c, err = client.Dial(ctx, cfg); err != nil {
									continue
								}
								defer c.Close()
							}
							_, err := c.LoginUser(ctx, fmt.Sprintf("nobody-%d-%d", i, j), "guess")
							if isCode(err, params.CodeUnauthorized) {
								guesses.Add(1)
							} else if c.Err() != nil {
								c = nil
							}
						}
					}()
				}
			}
			login := func(user, password string) time.Duration {
				start := time.Now()
				c, err := client.Dial(ctx, client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert)})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if _, err := c.LoginUser(ctx, user, password); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			var admin, fresh []time.Duration
			began := time.Now()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				admin = append(admin, login("admin", creds.AdminPassword))
				b.StopTimer()
				pw := fmt.Sprintf("carol-password-%d", i)
				if err := d.State().SetUserPassword(b.Context(), "carol", pw); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				fresh = append(fresh, login("carol", pw))
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			median := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2]) / float64(time.Millisecond)
			}
			b.ReportMetric(median(admin), "admin-ms")
			b.ReportMetric(median(fresh), "fresh-ms")
			b.ReportMetric(float64(guesses.Load())/time.Since(began).Seconds(), "guesses/s")
		})
	}
}
