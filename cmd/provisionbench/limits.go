package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/provisiond/provisiond/internal/connlimit"
)

// What a run of many agents needs from the box, checked (and, as root,
// arranged) before anything starts, so a run of 100,000 agents fails at
// once with the command that fixes it instead of halfway through with
// "too many open files".
//
//   - Open files (RLIMIT_NOFILE): every agent is a socket in this process
//     and one in the daemon (both here with --daemon inproc). The tool
//     raises its soft limit to what the run needs; with CAP_SYS_RESOURCE
//     (root, unless a container drops it) it raises the hard limit too (up
//     to fs.nr_open). A child daemon and the echo server
//     inherit the limit: Go's runtime leaves a limit the program set itself
//     to its children.
//   - The child daemon's connection cap (--max-connections): its default is
//     sized to a quarter of the box's memory at the worst a client can make
//     a connection hold before login (internal/connlimit.DefaultMaxConns), so on
//     this 24 GiB box about 39,000. A self-started daemon is given a cap of
//     agents + fileMargin when the default is below that.
//   - Source ports: each loopback source address has the ephemeral port
//     range (net.ipv4.ip_local_port_range) once; agents spread over
//     127.0.0.2, 127.0.0.3, ... (sourceAddrs).

// fileMargin is the open files a process needs besides one per agent:
// the fixture's and probes' connections, the daemon's database, logs and
// listener, the runtime's epoll and pipes, sockets still closing.
const fileMargin = 1024

// agentsMax is the most agents (or writers, or machines) of the run.
func (o *options) agentsMax() int { return o.totalAgents() }

// filesNeeded is the open file limit each process of the run needs.
func (o *options) filesNeeded() uint64 {
	n := uint64(o.agentsMax())
	if o.loadgens > 0 || o.daemons > 1 {
		// Spread: the busiest process holds a share (spread.go).
		d := o.division(o.agentsMax())
		need := d.filesPerProcess()
		if o.loadgens == 0 {
			need = max(need, o.agentsMax()) // the agents are in this process
		}
		if o.daemonInProcess() {
			need = o.agentsMax() + d.agents // every daemon and the agents share it
		}
		return uint64(need) + fileMargin
	}
	if o.daemonInProcess() {
		return 2*n + fileMargin // both ends of every connection
	}
	return n + fileMargin
}

// fileLimitPlan is what setFileLimit does with RLIMIT_NOFILE.
type fileLimitPlan struct {
	max    uint64 // the hard limit now
	need   uint64
	nrOpen uint64 // fs.nr_open: the most a hard limit can be (0: unknown)
	// canRaise: the process has CAP_SYS_RESOURCE, which raising a hard
	// limit takes (root has it, unless a container drops it).
	canRaise bool
	root     bool
}

// limit returns the limit to set, or an error that names the limit, what
// the run needs and the command that provides it.
func (p fileLimitPlan) limit(agents int) (syscall.Rlimit, error) {
	if p.need <= p.max {
		return syscall.Rlimit{Cur: p.max, Max: p.max}, nil // the soft limit up to the hard one
	}
	if !p.canRaise {
		why := "only root can raise it; run the tool as root (it raises the limit itself), or raise it first"
		if p.root {
			why = "this process cannot raise it: it runs as root without CAP_SYS_RESOURCE (a container that drops it); raise it where the container is made"
		}
		return syscall.Rlimit{}, fmt.Errorf("open file limit (RLIMIT_NOFILE): %d agents need %d open files in this process and in the daemon, "+
			"but the hard limit is %d and %s: `ulimit -Hn %d && ulimit -n %d` in a shell that may, `prlimit --pid %d --nofile=%d:%d` from one, "+
			"`docker run --ulimit nofile=%d:%d`, or LimitNOFILE=%d in a systemd unit",
			agents, p.need, p.max, why, p.need, p.need, os.Getpid(), p.need, p.need, p.need, p.need, p.need)
	}
	if p.nrOpen != 0 && p.need > p.nrOpen {
		return syscall.Rlimit{}, fmt.Errorf("open file limit (RLIMIT_NOFILE): %d agents need %d open files per process, above the kernel's "+
			"fs.nr_open (%d), the most any hard limit can be; raise it first: `sysctl -w fs.nr_open=%d`",
			agents, p.need, p.nrOpen, p.need)
	}
	return syscall.Rlimit{Cur: p.need, Max: p.need}, nil
}

// capSysResource is CAP_SYS_RESOURCE's bit in /proc/self/status CapEff.
const capSysResource = 24

// hasCapability reports whether this process has capability bit c in
// effect (false where /proc does not say).
func hasCapability(c uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<c) != 0
		}
	}
	return false
}

// setFileLimit raises this process's RLIMIT_NOFILE to what the run needs
// (as root the hard limit too), which the child daemon and echo server
// inherit, and checks the system-wide fs.file-max. It returns the limit
// set.
func setFileLimit(o *options) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("open file limit: %w", err)
	}
	p := fileLimitPlan{max: lim.Max, need: o.filesNeeded(), nrOpen: readSysctl("fs/nr_open"),
		canRaise: hasCapability(capSysResource), root: os.Geteuid() == 0}
	want, err := p.limit(o.agentsMax())
	if err != nil {
		return 0, err
	}
	// Always set, even unchanged: a limit the program set itself is the
	// one its children get (see the package comment above).
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return 0, fmt.Errorf("open file limit (RLIMIT_NOFILE): setting %d (hard %d): %w", want.Cur, want.Max, err)
	}
	// Every process of the run together: this one, the daemon, the echo
	// server (conns --baseline), as many sockets again.
	if fileMax := readSysctl("fs/file-max"); fileMax != 0 {
		total := 3 * uint64(o.agentsMax())
		if inUse := filesInUse(); inUse+total > fileMax {
			return 0, fmt.Errorf("system-wide open files (fs.file-max %d, %d in use): %d agents need about %d more; raise it first: `sysctl -w fs.file-max=%d`",
				fileMax, inUse, o.agentsMax(), total, inUse+total+fileMargin)
		}
	}
	return want.Cur, nil
}

// checkDaemonFileLimit checks the open file limit of a daemon the tool
// did not start (--credentials with --daemon-pid): as root it raises it
// with prlimit(2) (its connection cap was sized at its start, which no
// limit raised now changes: the warning says so), otherwise it fails with
// the command that raises it.
func checkDaemonFileLimit(o *options) error {
	if o.credentials == "" || o.daemonPID == 0 {
		return nil
	}
	need := uint64(o.agentsMax()) + fileMargin
	var lim unix.Rlimit
	if err := unix.Prlimit(o.daemonPID, unix.RLIMIT_NOFILE, nil, &lim); err != nil {
		return nil // not ours to read; the run shows what it meets
	}
	if lim.Cur >= need {
		return nil
	}
	if !hasCapability(capSysResource) {
		return fmt.Errorf("the daemon (pid %d) has an open file limit (RLIMIT_NOFILE) of %d; %d agents need %d: "+
			"`prlimit --pid %d --nofile=%d:%d` as root (and restart it with --max-connections %d: its connection cap was sized at its start)",
			o.daemonPID, lim.Cur, o.agentsMax(), need, o.daemonPID, need, max(need, lim.Max), o.agentsMax()+fileMargin)
	}
	nl := unix.Rlimit{Cur: need, Max: max(need, lim.Max)}
	if err := unix.Prlimit(o.daemonPID, unix.RLIMIT_NOFILE, &nl, nil); err != nil {
		return fmt.Errorf("raising the daemon's (pid %d) open file limit to %d: %w", o.daemonPID, need, err)
	}
	fmt.Fprintf(o.stderr, "provisionbench: raised the daemon's (pid %d) open file limit from %d to %d; "+
		"its --max-connections was sized at its start: give it at least %d\n", o.daemonPID, lim.Cur, need, o.agentsMax()+fileMargin)
	return nil
}

// maxConnsFlag is the --max-connections a self-started daemon is given
// (0: none, its default is enough): the default is sized to a quarter of
// the box's memory (internal/connlimit.DefaultMaxConns) and refuses
// connections over it.
func (o *options) maxConnsFlag() int {
	need := o.division(o.agentsMax()).peakPerDaemon + fileMargin
	if connlimit.DefaultMaxConns() >= need {
		return 0
	}
	return need
}

func readSysctl(name string) uint64 {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.Fields(string(b) + " 0")[0], 10, 64)
	return n
}

// filesInUse is the system's allocated file handles (fs.file-nr's first
// figure).
func filesInUse() uint64 { return readSysctl("fs/file-nr") }

// portRange is net.ipv4.ip_local_port_range: the ephemeral ports of each
// source address.
func portRange() (lo, hi int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768, 60999, nil // Linux's default, where /proc says nothing
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("net.ipv4.ip_local_port_range: %q", b)
	}
	if lo, err = strconv.Atoi(f[0]); err == nil {
		hi, err = strconv.Atoi(f[1])
	}
	if err != nil || hi < lo {
		return 0, 0, fmt.Errorf("net.ipv4.ip_local_port_range: %q", b)
	}
	return lo, hi, nil
}

// sourcePlan spreads agents over loopback source addresses.
type sourcePlan struct {
	ports   int // ephemeral ports of one source address
	perAddr int // agents per source address
	addrs   int // source addresses the largest size uses
	// A load generator's share (loadgen.go): its agents are first, first+1,
	// ... and it binds addresses from 127.0.0.2 + base on, its own.
	first, base int
}

// portsPerAgent is the ephemeral ports an agent may hold on its source
// address at once: its connection, and sockets of its earlier tries in
// TIME_WAIT (60 s) after a storm's "try again" (a port in TIME_WAIT cannot
// be bound again; a storm of 10,000 agents met about 2 tries each).
const portsPerAgent = 5

// maxSourceAddrs bounds the addresses used: 127.0.0.2 ... within
// 127.0.0.0/8, which Linux's loopback answers without configuration.
const maxSourceAddrs = 1 << 16

func newSourcePlan(agents int) (sourcePlan, error) {
	lo, hi, err := portRange()
	if err != nil {
		return sourcePlan{}, err
	}
	return sourcePlanFor(lo, hi, agents)
}

// sourcePlanFor plans agents over source addresses of ports lo-hi each.
func sourcePlanFor(lo, hi, agents int) (sourcePlan, error) {
	p := sourcePlan{ports: hi - lo + 1}
	p.perAddr = max(1, p.ports/portsPerAgent)
	p.addrs = (agents + p.perAddr - 1) / p.perAddr
	if p.addrs > maxSourceAddrs {
		return p, fmt.Errorf("net.ipv4.ip_local_port_range %d-%d gives %d ports per source address: %d agents would need %d loopback addresses; widen it: `sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"`",
			lo, hi, p.ports, agents, p.addrs)
	}
	return p, nil
}

// sourceAddr is the source address of agent i: 127.0.0.2 for the first
// perAddr agents, then 127.0.0.3, ..., on into 127.0.1.x and beyond.
func (p sourcePlan) sourceAddr(i int) net.IP {
	k := 2 + (p.base+(i-p.first)/p.perAddr)%maxSourceAddrs
	return net.IPv4(127, byte(k>>16), byte(k>>8), byte(k))
}

// describe says what the plan gives, for the report.
func (p sourcePlan) describe() string {
	if p.addrs <= 1 {
		return fmt.Sprintf("127.0.0.2 (%d ephemeral ports, %d agents per address)", p.ports, p.perAddr)
	}
	return fmt.Sprintf("%d addresses from 127.0.0.2 (%d agents each, of %d ephemeral ports)", p.addrs, p.perAddr, p.ports)
}
