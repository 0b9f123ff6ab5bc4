package robustness

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
)

// When the run is root and ip(8) is there, each daemon runs in a network
// namespace of its own, joined to the harness's by a veth pair: the
// daemon listens on its end, its proxies (its links to the members) on
// the harness's end. A partition then sets the harness's end of the pair
// down, which cuts the daemon off in the kernel, as a host losing its
// network would be (its etcd links and its clients' connections alike:
// sockets stay open, packets are lost); healing sets it up again.
// Otherwise (not root) the proxies alone partition it (etcdtest.Proxy).
//
// Names carry a per-run prefix (the process id and a counter of runs), so
// that runs at once on one box do not collide; each run removes its
// namespaces (and with them the pairs) whatever way it ends.

// netns is one daemon's namespace and veth pair.
type netns struct {
	name           string // the namespace
	host, peer     string // the pair's ends: the harness's, the daemon's
	hostIP, peerIP string
}

var netnsRuns atomic.Int32

// netnsReason says why namespaces cannot be used ("" if they can).
func netnsReason() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command"
	}
	return ""
}

// netnsPrefix is a new run's prefix of names, and the second octet of
// its addresses (10.X.Y.0/30 per daemon).
func netnsPrefix() (string, int) {
	run := netnsRuns.Add(1)
	pid := os.Getpid() % 100000
	return fmt.Sprintf("rb%d%c", pid, 'a'+run%26), 100 + (pid+int(run))%100
}

// newNetns makes daemon i's namespace and pair.
func newNetns(prefix string, octet, i int) (*netns, error) {
	n := &netns{name: fmt.Sprintf("%sd%d", prefix, i), host: fmt.Sprintf("%sd%dh", prefix, i), peer: fmt.Sprintf("%sd%dn", prefix, i),
		hostIP: fmt.Sprintf("10.%d.%d.1", octet, 4*i), peerIP: fmt.Sprintf("10.%d.%d.2", octet, 4*i)}
	steps := [][]string{
		{"netns", "add", n.name},
		{"link", "add", n.host, "type", "veth", "peer", "name", n.peer},
		{"link", "set", n.peer, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.host},
		{"link", "set", n.host, "up"},
		{"netns", "exec", n.name, "ip", "addr", "add", n.peerIP + "/30", "dev", n.peer},
		{"netns", "exec", n.name, "ip", "link", "set", n.peer, "up"},
		{"netns", "exec", n.name, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			n.remove()
			return nil, err
		}
	}
	return n, nil
}

// wrap is the command that runs a program in the namespace (it execs it).
func (n *netns) wrap() []string { return []string{"ip", "netns", "exec", n.name} }

// cut sets the harness's end of the pair down (true) or up (false).
func (n *netns) cut(down bool) error {
	state := "up"
	if down {
		state = "down"
	}
	return ip("link", "set", n.host, state)
}

// remove deletes the namespace (its end of the pair goes with it, and the
// other end with that) and the harness's end if it is left.
func (n *netns) remove() {
	_ = ip("netns", "del", n.name)
	_ = ip("link", "del", n.host) // gone already, unless the namespace was never made
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
