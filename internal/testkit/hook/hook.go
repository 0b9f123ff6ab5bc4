// Package hook carries what package internal/testkit needs from package
// provisiondtest without provisiondtest's exported API naming a type of
// internal/daemon (which no other module can import). provisiondtest
// sets these when it is initialised; only internal/testkit reads them.
package hook

import "github.com/provisiond/provisiond/internal/daemon"

var (
	// WithDaemonConfig returns a provisiondtest.Option that edits the
	// daemon's configuration after the other options.
	WithDaemonConfig func(func(*daemon.Config)) any
	// Daemon returns the daemon of a *provisiondtest.Server.
	Daemon func(server any) *daemon.Daemon
)
