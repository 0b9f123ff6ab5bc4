package e2e

import (
	"flag"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
)

// hungTimeout is the daemons' --etcd-request-timeout in
// TestEtcdMemberHung: the tests' 2s, or serve's default (5s) for the
// figure docs/scale-out.md quotes with it:
//
//	go test -v -run TestEtcdMemberHung ./internal/e2e/ -args -hung-request-timeout 5s
var hungTimeout = flag.Duration("hung-request-timeout", 2*time.Second, "TestEtcdMemberHung's --etcd-request-timeout")

// hungBound is how long writers may pause when an etcd member hangs
// before TestEtcdMemberHung fails: five times the request timeout,
// generous for a loaded box, and short of the 12 s (gRPC's 10 s minimum
// keepalive ping interval and a 2 s timeout) writers paused before the
// daemons watched their members.
func hungBound() time.Duration { return 5 * *hungTimeout }

// TestEtcdMemberHung: two daemons on a three-member etcd whose members
// are processes of their own; agents and the admin write through both
// while a follower, and then the leader, is stopped with SIGSTOP (a hung
// machine: its sockets open, nothing answered). Each daemon moves off the
// hung member (its member watch finds it not answering within half the
// request timeout while another does) and writes resume within
// hungBound; nothing acknowledged is lost; the watchers keep working;
// resumed with SIGCONT, the member is used again (writeThroughFaults).
func TestEtcdMemberHung(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.NewProcesses(t, bin(t, "etcdcluster"), 3)
	t.Logf("request timeout %s", *hungTimeout)
	pauses := writeThroughFaults(t, cluster.Endpoints(), "/hung/", memberFault{
		what:   "hung (SIGSTOP)",
		leader: cluster.Leader,
		strike: cluster.Pause,
		heal:   cluster.Resume,
	}, "--etcd-request-timeout", hungTimeout.String())
	for role, longest := range pauses {
		if longest > hungBound() {
			t.Errorf("a writer paused %s when the %s hung; want at most %s (a daemon must move off a hung member)",
				longest.Round(time.Millisecond), role, hungBound())
		}
	}
}
