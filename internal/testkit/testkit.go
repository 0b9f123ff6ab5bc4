// Package testkit is provisiond's own way into a provisiondtest.Server:
// the daemon's whole configuration and the daemon itself (its state, hub,
// provider), for this module's tests of internal/daemon and what is built
// on it. provisiondtest's exported API is what another module can use;
// these take internal/daemon's types and so live here.
//
// It also holds what the tests of internal/daemon and of the facades
// (facades/<name>, package <name>_test) share: Start, the dials and
// logins, the Provisioner tests' model (ProvFixture), a CAAS model with
// its unit provisioner (CAASEnv), typed calls (Call, MustCall, AdminCall),
// the pending watch helpers and the error checks. Helpers take the
// test's testing.TB and fail it; those that call must run on the test's
// goroutine.
package testkit

import (
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/testkit/hook"
	"github.com/provisiond/provisiond/provisiondtest"
)

// WithDaemonConfig edits the daemon's configuration after the Server's
// other options.
func WithDaemonConfig(f func(*daemon.Config)) provisiondtest.Option {
	return hook.WithDaemonConfig(f).(provisiondtest.Option)
}

// Daemon is s's daemon.
func Daemon(s *provisiondtest.Server) *daemon.Daemon { return hook.Daemon(s) }
