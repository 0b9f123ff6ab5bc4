// Package e2e holds the end-to-end tests of scale-out (docs/scale-out.md):
// the built provisiond binary, several daemons of one controller on a real
// etcd (embedded in the test process, on loopback, by internal/etcdtest:
// one member, or three where a test kills one; or three members each a
// process of the built etcdcluster where a test hangs one with SIGSTOP),
// driven over the real TLS websocket by rpc/client as agents and
// operators drive it. The tests kill daemons with SIGKILL and etcd
// members as a crash would, hang members, fill etcd's space quota, and
// check that nothing acknowledged is lost, that agents fail over to the
// daemons left using the addresses the controller gave them, that their
// watchers see every later change, and that a daemon cut off from etcd
// refuses logins. They also run scripts/etcd-cluster.sh.
//
// Recovery times the tests measure are logged (go test -v), never
// asserted: docs/scale-out.md, "Failures and what they cost", quotes them.
//
// The package has no code of its own outside its tests.
package e2e
