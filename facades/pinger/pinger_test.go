package pinger_test

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// Pinger as agents use it: an agent connection that does not ping within
// the ping timeout is closed, one that pings is kept; users have no
// timeout.

func TestPingTimeoutClosesAgentConnection(t *testing.T) {
	d := testkit.Start(t, func(c *daemon.Config) { c.PingTimeout = 200 * time.Millisecond })
	creds := d.Credentials()
	agent := testkit.LoginController(t, d, creds.ControllerModelUUID)
	user := testkit.LoginAdmin(t, d, creds.ControllerModelUUID)
	select {
	case <-agent.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("agent connection without pings was not closed")
	}
	if code := agent.CloseCode(); code != websocket.CloseNormalClosure {
		t.Errorf("close code = %d; want 1000", code)
	}
	// Users get no ping timeout.
	if err := user.Ping(testkit.Ctx(t)); err != nil {
		t.Fatalf("user connection: %v", err)
	}
}

func TestPingKeepsAgentConnection(t *testing.T) {
	d := testkit.Start(t, func(c *daemon.Config) { c.PingTimeout = 2 * time.Second })
	agent := testkit.LoginController(t, d, d.Credentials().ControllerModelUUID)
	for i := 0; i < 6; i++ {
		if err := agent.Ping(testkit.Ctx(t)); err != nil {
			t.Fatalf("ping %d: %v", i, err)
		}
		select {
		case <-agent.Done():
			t.Fatal("pinging connection closed")
		case <-time.After(500 * time.Millisecond):
		}
	}
}
