package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/asuser"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestBuiltDaemonServesTheOperatorUnderAFlood: the built daemon, run as
// root with --max-connections 300, against another local user (nobody,
// through internal/asuser) who opens 300 websockets that never log in and
// then sends logins as users who do not exist, 5 a second. Before, every
// admin login was reset at accept for as long as the sockets lasted
// (--login-timeout, and the client reopened them at once), /metrics was
// unreachable, and the unknown-user logins on loopback kept the admin out
// (too many failed logins). Now the other user holds its share of
// connections before login (a sixteenth of the cap) and its guesses back
// off alone; the admin (this process, root: the local operator) logs in
// every time, and /metrics answers on the API port and on --metrics-addr.
func TestBuiltDaemonServesTheOperatorUnderAFlood(t *testing.T) {
	if !asuser.Supported() {
		t.Skip("a local client of another user needs root (internal/asuser)")
	}
	// --login-timeout: the held connections stay however slow the box.
	d := startBoltDaemon(t, "flood", "--max-connections", "300", "--metrics-addr", "127.0.0.1:0", "--login-timeout", "10m")
	creds := d.credentials(t)
	cfg := client.Config{Addr: d.addr, CACert: []byte(creds.CACert), DialTimeout: 10 * time.Second}
	const nobody = 65534

	var mu sync.Mutex
	var held []*client.Conn
	refused := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 75 {
				var c *client.Conn
				err := asuser.Do(nobody, func() error {
					var err error
					c, err = client.Dial(ctxT(t), cfg)
					return err
				})
				mu.Lock()
				if err != nil {
					refused++
				} else {
					held = append(held, c)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	t.Logf("nobody: %d websockets held before login, %d refused", len(held), refused)
	if len(held) != 300/16 {
		t.Errorf("another local user holds %d connections before login; want %d", len(held), 300/16)
	}

	// nobody's guesses at unknown names, 5 a second on one of its
	// connections, while the admin logs in every second.
	stop := make(chan struct{})
	guesses := make(chan string, 1)
	go func() {
		outcomes := map[string]int{}
		for i := 0; ; i++ {
			select {
			case <-stop:
				guesses <- fmt.Sprint(outcomes)
				return
			case <-time.After(200 * time.Millisecond):
			}
			_, err := held[0].LoginUser(ctxT(t), "nobody", "guess")
			outcomes[params.ErrCode(err)]++
		}
	}()
	for range 10 {
		c, err := client.Dial(ctxT(t), cfg)
		if err != nil {
			t.Fatalf("the admin's dial: %v", err)
		}
		if _, err := c.LoginUser(ctxT(t), creds.AdminUser, creds.AdminPassword); err != nil {
			t.Errorf("the admin's login: %v", err)
		}
		c.Close()
		time.Sleep(time.Second) // the guesser's pace, in real time
	}
	close(stop)
	t.Logf("nobody's guesses by code: %s", <-guesses)

	var metricsAddr string
	waitFor(t, "the metrics listener's address in the log", func() bool {
		metricsAddr = d.loggedAddr("serving metrics")
		return metricsAddr != ""
	})
	const refusals = `provisiond_connections_refused_total{listener="api",reason="address"}`
	resp, err := (&http.Client{Timeout: callTimeout}).Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("/metrics on --metrics-addr: %v", err)
	}
	defer resp.Body.Close()
	for what, n := range map[string]float64{
		"--metrics-addr": metricIn(t, "/metrics on --metrics-addr", resp, refusals),
		"the API port":   metric(t, creds, d, refusals),
	} {
		if n != float64(refused) {
			t.Errorf("/metrics on %s counts %v refusals for the address; want %d", what, n, refused)
		}
	}
}
