// Package provisiondtest runs a real provisiond in-process for integration
// tests, in the manner of net/http/httptest, etcd's embed and Kubernetes'
// envtest:
//
//	func TestMyAgent(t *testing.T) {
//		srv := provisiondtest.Start(t)
//		agent := srv.MachineAgent(t, srv.DefaultModel(), "0")
//		life, err := client.NewProvisioner(agent).Machine("machine-0").Life(t.Context())
//		...
//	}
//
// Start runs the daemon that `provisiond serve` runs (internal/daemon),
// with its real state on disk, its real TLS websocket on 127.0.0.1:0 and
// its real facades, with a data dir in t.TempDir(). It fails the test,
// with the daemon's log, when the daemon cannot start, and stops the
// daemon at the test's cleanup, after the connections the Server's helpers
// opened for the test; when the test failed, the daemon's log is written
// to the test log. Two Servers in one test are two independent
// controllers (own data dir, port, CA, credentials).
//
// From a Server come the credentials (Credentials, CredentialsFile: the
// credentials.yaml the daemon wrote), connections logged in as the admin
// user (Admin), as the controller agent (ControllerAgent) and as a machine
// agent made ready the way Juju's provisioner does it (MachineAgent: the
// machine is added when missing, its password and nonce are set through
// the Provisioner facade, by the controller agent for a top-level machine
// and by the host's agent for a container). CAASModel makes a Kubernetes
// model with applications at a given scale; WaitRevision waits until the
// daemon has applied a revision of its state, WaitStatus until a model's
// status (what `provisionctl status` shows) meets a condition. Helpers
// take a model's name ("default") or UUID. Typed clients for the facades
// are in package rpc/client: client.NewProvisioner(conn),
// client.NewCAASUnitProvisioner(conn), client.NewModelAdmin(conn).
//
// # Options
//
// WithLimits sets the daemon's limits (request and watcher quotas, ping
// and login timeouts, the agent login rate), so tests of those paths run
// in milliseconds; WithClock gives the clock of the timer watchers
// (machine error retry, start-time batching), e.g. a
// watcher/watchertest.FakeClock, so they are deterministic. WithStore
// chooses the state engine: bbolt, the default, or StoreEtcd, which starts
// a one-member embedded etcd on loopback for the Server (stopped when it
// closes) when the test links one in with
//
//	import _ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd"
//
// (kept apart so that the kit alone does not link etcd's server: the kit
// brings about 37 modules, the embedded etcd about 24 more). Several daemons of one controller: start the first on etcd,
// then others with Join(first), or give each WithEtcd(endpoints, prefix)
// of an etcd the test runs itself. WithAgent runs the reference agent
// (provisionagent's) beside the daemon on a simulated cloud, so machines
// the test adds get provisioned and started and Kubernetes applications'
// pods run, as on a controller at work.
//
// Every option and type here can be used from another module. The module
// is not published: a repository depends on it with a replace directive
// pointing at a checkout (go.mod: `require github.com/provisiond/provisiond
// v0.0.0` and `replace github.com/provisiond/provisiond => ../provisiond`),
// or, where it can reach the repository with git, on a tag or commit:
// GOPRIVATE=github.com/provisiond/provisiond go get
// github.com/provisiond/provisiond@<tag> (fetched from the repository
// itself, not the module proxy).
//
// New and Close do what Start does without a testing.TB, for a TestMain or
// a runnable Example; the caller must Close.
//
// # Concurrency
//
// A Server's methods are safe for concurrent use; those taking a
// testing.TB fail it with t.Fatal and so must be called on the test's own
// goroutine. The Server owns the daemon (its goroutines: the HTTP server,
// the connections' readers, the state's committer) and the connections it
// opens for its own use (the controller agent and the hosts' agents that
// provision machines), and WithAgent's agent (its goroutines and
// connections); Close stops them all, the agent first. Connections it
// returns to a test are closed at that test's cleanup.
package provisiondtest
