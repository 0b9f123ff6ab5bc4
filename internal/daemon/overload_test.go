package daemon_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/asuser"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
)

// Under a real overload of the daemon's process (more goroutines
// runnable than it can run, so each waits to run longer than
// --shed-latency), a new connection from another local user is reset at
// accept and counted as refused for "overload", and the local operator
// still connects and logs in; once the overload ends, the other user
// connects again and /metrics says the daemon does not shed.
func TestShedsNewConnectionsUnderOverload(t *testing.T) {
	if !asuser.Supported() {
		t.Skip("local clients of other users need root (internal/asuser)")
	}
	d := start(t, func(c *daemon.Config) { c.ShedLatency = 10 * time.Millisecond })
	creds := d.Credentials()
	const other = 65534

	// 4 goroutines per P that never block: each runnable goroutine waits
	// about 3 slices of the scheduler's 10 ms to run.
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() { // spins: preempted, never blocked
			}
		}()
	}
	stopSpinning := func() {
		stop.Store(true)
		wg.Wait()
	}
	defer stopSpinning()

	// A TCP connection, no TLS: the daemon resets one it sheds at
	// accept; one it takes waits for a ClientHello that never comes.
	deadline := time.Now().Add(time.Minute)
	for !probeReset(t, d, other) {
		if time.Now().After(deadline) {
			t.Fatal("no connection was shed within a minute of the overload")
		}
	}
	// The operator's, within its share: dialled and logged in under the
	// overload (slowly: every goroutine waits its turn).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addr: d.Addr(), ModelUUID: creds.DefaultModelUUID, CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatalf("the local operator under the overload: %v", err)
	}
	defer c.Close()
	if _, err := c.LoginUser(ctx, "admin", creds.AdminPassword); err != nil {
		t.Fatalf("the local operator's login under the overload: %v", err)
	}
	m := metricsText(t, d, nil)
	stopSpinning()
	for _, want := range []string{`provisiond_sched_latency_seconds_bucket{le="0.01"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(m, `reason="overload"} 0`) {
		t.Errorf("no connection counted as refused for overload:\n%s", grepLines(m, "refused"))
	}

	deadline = time.Now().Add(time.Minute)
	for {
		c, err := tryDialAs(t, d, other, "")
		if err == nil {
			c.Close()
			break
		}
		if !droppedConn(err) || time.Now().After(deadline) {
			t.Fatalf("another local user after the overload: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // a client's retry, not a settle: the loop is bounded above
	}
	if m := metricsText(t, d, nil); !strings.Contains(m, "provisiond_shedding 0") {
		t.Errorf("/metrics after the overload:\n%s", grepLines(m, "shedding"))
	}
}

// probeReset opens a TCP connection to d's API port as local user uid
// and reports whether the daemon reset it within 5 s.
func probeReset(t *testing.T, d *daemon.Daemon, uid uint32) bool {
	t.Helper()
	var c net.Conn
	err := asuser.Do(uid, func() (err error) {
		c, err = net.DialTimeout("tcp", d.Addr(), 10*time.Second)
		return err
	})
	switch {
	case errors.Is(err, syscall.ECONNRESET): // reset before the connect returned
		return true
	case err != nil:
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return errors.Is(err, syscall.ECONNRESET)
}
