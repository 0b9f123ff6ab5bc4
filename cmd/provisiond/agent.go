package main

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/agent"
	"github.com/provisiond/provisiond/internal/daemon"
)

// checkAgent validates serve's --agent: "" (none) or "sim" (the reference
// agent on its simulated cloud).
func checkAgent(kind string) error {
	switch kind {
	case "", "sim":
		return nil
	}
	return fmt.Errorf("--agent %q: want sim (or nothing)", kind)
}

// startAgent runs the reference agent in the daemon's process (serve
// --agent sim), once the daemon listens: it reads the credentials.yaml the
// daemon wrote and connects to it over loopback, as provisionagent would.
// The returned stop cancels it and waits until every goroutine it started
// has returned; serve calls it before shutting the daemon down.
func startAgent(d *daemon.Daemon, dataDir, kind string, log *slog.Logger) (stop func(), err error) {
	if kind == "" {
		return func() {}, nil
	}
	creds, err := credentials.Read(filepath.Join(dataDir, credentials.File))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return agent.Start(agent.Config{
		Credentials: creds, Addrs: []string{loopback(d.Addr())}, Cloud: agent.NewSimCloud(),
		Logger: log.With("component", "agent"),
	})
}

// loopback is the address a local client dials for listen address addr:
// the loopback address of its family when it listens on all addresses.
func loopback(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
