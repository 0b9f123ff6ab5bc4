package daemon

import (
	"testing"
	"time"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/client"
)

// provisiond_connections_ended_total counts each way an API connection
// ends, through real connections: a client's close, and a connection
// closed by the daemon (no login within --login-timeout); every reason is
// served from the start, at 0.
func TestConnectionsEndedMetric(t *testing.T) {
	cfg := Default(t.TempDir())
	cfg.Addr = "127.0.0.1:0"
	cfg.LoginTimeout = 300 * time.Millisecond
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(testCtx(t)) })
	for _, r := range rpc.EndReasons {
		if n := metricsOf(t, d, "provisiond_connections_ended_total", r); n != 0 {
			t.Fatalf("%v connections ended for %q before any connected", n, r)
		}
	}
	dialAndClose(t, d)
	waitFor(t, "a client_closed end", func() bool {
		return metricsOf(t, d, "provisiond_connections_ended_total", rpc.EndClientClosed) == 1
	})
	c, err := client.Dial(testCtx(t), client.Config{Addr: d.Addr(), CACert: []byte(d.Credentials().CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-c.Done(): // no login: the daemon closes it
	case <-time.After(20 * time.Second):
		t.Fatal("a connection without a login stayed open 20s")
	}
	waitFor(t, "a closed end", func() bool {
		return metricsOf(t, d, "provisiond_connections_ended_total", rpc.EndClosed) == 1
	})
	if n := metricsOf(t, d, "provisiond_connections_ended_total", rpc.EndClientClosed); n != 1 {
		t.Fatalf("%v client_closed ends, want 1", n)
	}
}
