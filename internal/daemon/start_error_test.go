package daemon_test

import (
	"net"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
)

// A Start that fails after opening the state (here: the address is taken)
// returns the error and closes the state, so the data dir can be opened
// again; it used to panic on a nil *Daemon in its cleanup.
func TestStartFailsCleanlyAfterOpeningState(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := daemon.Default(t.TempDir())
	cfg.Addr = ln.Addr().String()
	if d, err := daemon.Start(cfg); err == nil {
		t.Fatalf("Start on a taken address succeeded (%s)", d.Addr())
	}
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatalf("Start after a failed Start: %v", err)
	}
	if err := d.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}
