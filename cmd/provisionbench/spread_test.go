package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// The spread workloads (spreadruns.go): agents in load generator
// processes (this test binary re-executed, see TestMain) on two or three
// child daemons on one etcd member the tool starts. Small and short;
// correctness only: every agent connected, nothing lost or duplicated,
// the report's shape. Never speed.

func checkZero(t *testing.T, rep *Report, size int, names ...string) {
	t.Helper()
	for _, name := range names {
		if v := figure(t, rep, size, name); v != 0 {
			t.Errorf("%s %d: %s = %v, want 0", rep.Workload, size, name, v)
		}
	}
}

func checkDivision(t *testing.T, rep *Report, want string) {
	t.Helper()
	d, _ := rep.Parameters["division"].(string)
	if !strings.Contains(d, want) {
		t.Errorf("division %q does not say %q", d, want)
	}
}

func TestSpreadConns(t *testing.T) {
	// The load generators give way (each checks that every thread of
	// its own has the nice value, or its init fails).
	rep := runJSON(t, "conns", "-n", "200", "--settle", "100ms", "--baseline", "--store", "etcd", "--daemons", "2", "--loadgens", "2",
		"--loadgen-nice", "5")
	checkDivision(t, rep, "200 agents in 2 load generator processes of at most 100")
	if n, _ := rep.Parameters["loadgen-nice"].(float64); n != 5 {
		t.Errorf("parameters: loadgen-nice = %v, want 5", rep.Parameters["loadgen-nice"])
	}
	if v := figure(t, rep, 200, "agents connected"); v != 200 {
		t.Errorf("agents connected = %v, want 200", v)
	}
	if v := figure(t, rep, 200, "watchers open"); v != 400 {
		t.Errorf("watchers open = %v, want 400 (2 per agent)", v)
	}
	checkZero(t, rep, 200, "connections dropped", "  agents still without a daemon")
	// Read from each daemon before the agents and before they close.
	figure(t, rep, 200, "connections ended by the daemons")
	for _, d := range []string{"daemon 1 ", "daemon 2 "} {
		if v := figure(t, rep, 200, d+"agents"); v != 100 {
			t.Errorf("%sagents = %v, want 100 (agent i on daemon i mod 2)", d, v)
		}
		for _, name := range []string{"KiB/agent", "live heap KiB/agent", "goroutines/agent", "live heap before the agents (replica, state)", "RSS"} {
			figure(t, rep, 200, d+name)
		}
	}
	for _, name := range []string{"daemon KiB/agent", "daemon KiB/watcher", "idle conn KiB/conn", "KiB/agent vs idle conn",
		"daemon live heap + stacks KiB/agent", "live heap + stacks vs idle conn's",
		"etcd RSS", "etcd database in use", "  in use KiB/machine of the model"} {
		figure(t, rep, 200, name)
	}
}

func TestSpreadWatch(t *testing.T) {
	rep := runJSON(t, "watch", "-n", "100", "--watchers", "3", "--rate", "20", "--duration", "1s", "--baseline",
		"--store", "etcd", "--daemons", "2", "--loadgens", "2")
	if d := figure(t, rep, 100, "deliveries"); d <= 0 {
		t.Error("no deliveries")
	}
	checkZero(t, rep, 100, "lost", "duplicates", "unknown changes", "failed writes", "etcd lost")
	for _, name := range []string{"spurious wake-ups", "daemon 1 p99 latency", "daemon 2 p99 latency", "etcd p99 latency",
		"p99 vs etcd p99", "daemon bytes allocated per delivery", "daemon objects allocated per change",
		"daemon GC cycles (all daemons)", "  live heap KiB/watcher", "load generators' GC cycles", "daemon CPU per change",
		"etcd CPU per change", "CPU stolen by the host", "connections ended by the daemons",
		"echo p99 latency", "etcd p99 + echo p99 latency", "p99 vs etcd p99 + echo p99", "p99 over etcd p99 + echo p99"} {
		figure(t, rep, 100, name)
	}
	// One daemon on bbolt: the load generators alone; an idle window
	// before the changes.
	rep = runJSON(t, "watch", "-n", "40", "--watchers", "2", "--rate", "20", "--duration", "1s", "--loadgens", "2", "--baseline",
		"--idle-window")
	checkDivision(t, rep, "1 daemon(s)")
	figure(t, rep, 40, "p99 vs echo p99")
	if d := figure(t, rep, 40, "deliveries"); d <= 0 {
		t.Error("bbolt: no deliveries")
	}
	checkZero(t, rep, 40, "lost", "duplicates", "unknown changes", "failed writes")
	// The idle window's rates, and each per-change figure less them:
	// never more than the figure itself.
	if p := figure(t, rep, 40, "idle: agent pings (Pinger.Ping) per second"); p < 0 {
		t.Errorf("idle pings per second = %v", p)
	}
	figure(t, rep, 40, "idle: agent pings per change")
	for _, name := range []string{"daemon CPU per change", "load generator CPU per change", "daemon bytes allocated per change",
		"daemon objects allocated per change"} {
		all, less := figure(t, rep, 40, name), figure(t, rep, 40, name+", less idle")
		if less > all {
			t.Errorf("%s: %v, less idle %v", name, all, less)
		}
	}
	for _, name := range []string{"idle: daemon CPU per second", "idle: daemon bytes allocated per second", "idle: daemon objects allocated per second"} {
		figure(t, rep, 40, name)
	}
}

// The last of three daemons is killed while changes go on; its agents
// come back on the others and their watchers miss nothing.
func TestSpreadFailover(t *testing.T) {
	rep := runJSON(t, "failover", "-n", "40", "--rate", "20", "--store", "etcd", "--daemons", "3", "--loadgens", "2")
	checkDivision(t, rep, "120 agents in 2 load generator processes of at most 60")
	if v := figure(t, rep, 40, "agents moved"); v != 40 {
		t.Errorf("agents moved = %v, want 40", v)
	}
	checkZero(t, rep, 40, "lost", "duplicates", "survivors dropped", "other errors", "failed writes", "  of which no free source port")
	if figure(t, rep, 40, "all back") <= 0 || figure(t, rep, 40, "longest without a daemon") <= 0 {
		t.Error("no failover times")
	}
	figure(t, rep, 40, "changes during the failover")
	figure(t, rep, 40, "connections ended by the daemons") // the killed daemon's read before the kill
	// Why the agents' connections ended, as they saw it: the killed
	// daemon sent no close frame.
	for name, want := range map[string]float64{"agents' connections ended, as the agents saw it": 40,
		"  of which " + endNoCloseFrame: 40} {
		if v := figure(t, rep, 40, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	// The 120 agents are on the two survivors, wherever each went.
	if few, most := figure(t, rep, 40, "agents per daemon after, fewest"), figure(t, rep, 40, "agents per daemon after, most"); few+most != 120 {
		t.Errorf("agents after the failover: fewest %v + most %v, want 120 on the two survivors", few, most)
	}

	// --resume: each moved agent resumes its watchers (one bulk Watch
	// call) from the revision their events covered; nothing lost.
	rep = runJSON(t, "failover", "-n", "40", "--watchers", "3", "--rate", "20", "--store", "etcd", "--daemons", "3", "--resume")
	checkDivision(t, rep, "120 agents in 1 load generator processes of at most 120")
	if v := figure(t, rep, 40, "agents moved"); v != 40 {
		t.Errorf("--resume: agents moved = %v, want 40", v)
	}
	if v := figure(t, rep, 40, "watch calls resumed"); v != 40 {
		t.Errorf("--resume: watch calls resumed = %v, want 40", v)
	}
	checkZero(t, rep, 40, "lost", "duplicates", "survivors dropped", "other errors", "failed writes", "watch calls reset (then afresh)")
	if v := figure(t, rep, 40, "resumed watchers that replayed the history"); v > 120 {
		t.Errorf("--resume: %v resumed watchers replayed the history, want at most 120 (40 agents x 3)", v)
	}
	figure(t, rep, 40, "history reads of the store per resumed watcher")
}

// Both daemons restart at once, then one at a time (--rolling): every
// agent is back, with no error but try again and refused connections.
func TestSpreadStorm(t *testing.T) {
	rep := runJSON(t, "storm", "-n", "60", "--store", "etcd", "--daemons", "2", "--loadgens", "2")
	if v := figure(t, rep, 60, "reconnections"); v != 60 {
		t.Errorf("reconnections = %v, want 60", v)
	}
	checkZero(t, rep, 60, "other errors", "/health probes failed", "  of which no free source port")
	figure(t, rep, 60, "connections ended by the daemons") // each read before its stop, and its new process at the end
	figure(t, rep, 60, "CPU per agent back: the agents' processes")
	figure(t, rep, 60, "CPU per agent back: etcd")
	for _, name := range []string{"all back", "all daemons ready", "/health after listening, slowest daemon", "longest without a daemon",
		"CPU per agent back: daemons, from their start", "CPU of the storm over the box's cores"} {
		if figure(t, rep, 60, name) <= 0 {
			t.Errorf("%s: not positive", name)
		}
	}

	rep = runJSON(t, "storm", "-n", "60", "--store", "etcd", "--daemons", "2", "--loadgens", "2", "--rolling", "--rebalance=false")
	// Daemon 1's 30 agents move to daemon 2, then all 60 to daemon 1.
	if v := figure(t, rep, 60, "reconnections"); v != 90 {
		t.Errorf("reconnections = %v, want 90", v)
	}
	if v := figure(t, rep, 60, "daemon 2: agents moved"); v != 60 {
		t.Errorf("daemon 2: agents moved = %v, want 60", v)
	}
	checkZero(t, rep, 60, "other errors")
	// Each stop closed its connections with code 1001 (going away).
	for name, want := range map[string]float64{"agents' connections ended, as the agents saw it": 90,
		"  of which " + endCloseFrame + "1001": 90} {
		if v := figure(t, rep, 60, name); v != want {
			t.Errorf("--rolling: %s = %v, want %v", name, v, want)
		}
	}
	// Without the daemons' rebalancing nothing sends them back: the
	// daemon restarted last holds none.
	for name, want := range map[string]float64{"daemon 1: agents after": 60, "daemon 2: agents after": 0,
		"agents per daemon after, most": 60, "daemons holding no agent after": 1} {
		if v := figure(t, rep, 60, name); v != want {
			t.Errorf("--rolling: %s = %v, want %v", name, v, want)
		}
	}
	if figure(t, rep, 60, "longest without a daemon") <= 0 {
		t.Error("no time without a daemon")
	}

	// With it (the default) the daemon over its share (60, by more than
	// the margin of 32) hands agents to the one restarted last.
	rep = runJSON(t, "storm", "-n", "160", "--watchers", "1", "--store", "etcd", "--daemons", "2", "--loadgens", "1", "--rolling")
	checkZero(t, rep, 160, "other errors")
	checkZero(t, rep, 160, "daemons holding no agent after")
	if most := figure(t, rep, 160, "agents per daemon after, most"); most > 80+32+8 {
		t.Errorf("--rolling, rebalancing: %v agents on the busiest daemon after, want at most 120", most)
	}
	if figure(t, rep, 160, "rebalanced, from the last restart") <= 0 {
		t.Error("--rolling, rebalancing: no time to rebalance")
	}
	if figure(t, rep, 160, "  of which HTTP 503 (a daemon draining, or over its share: rebalancing)") <= 0 {
		t.Error("--rolling, rebalancing: no dial refused by the daemon over its share")
	}

	// With a drain each stop hands its agents over a share at a time;
	// they are all back, and the stop took the drain at least.
	rep = runJSON(t, "storm", "-n", "20", "--store", "etcd", "--daemons", "2", "--loadgens", "1", "--rolling", "--drain", "1s")
	if v := figure(t, rep, 20, "reconnections"); v != 30 {
		t.Errorf("--drain: reconnections = %v, want 30", v)
	}
	checkZero(t, rep, 20, "other errors")
	if v := figure(t, rep, 20, "  of which "+endCloseFrame+"1001"); v != 30 {
		t.Errorf("--drain: %v connections ended by the going-away close frame, want 30", v)
	}
}

func TestSpreadShape(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		loadgens, daemons  int
		perLoadgen, peakOn int
	}{
		// The defaults: a load generator per 15,000 agents, a daemon per
		// 17,000 on etcd.
		{[]string{"conns", "-n", "100000", "--store", "etcd"}, 7, 6, 14286, 16667},
		{[]string{"watch", "-n", "10000"}, 0, 1, 0, 10000},
		{[]string{"watch", "-n", "10000", "--loadgens", "2", "--store", "etcd", "--daemons", "2"}, 2, 2, 5000, 5000},
		{[]string{"storm", "-n", "1000", "--store", "etcd", "--daemons", "3"}, 1, 3, 1000, 500},
		{[]string{"failover", "-n", "3000", "--store", "etcd", "--daemons", "3", "--loadgens", "2"}, 2, 3, 4500, 4500},
	} {
		o, err := parseOptions(tc.args[0], tc.args[1:], io.Discard, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		d := o.division(o.totalAgents())
		if d.loadgens != tc.loadgens || d.daemons != tc.daemons || d.perLoadgen != tc.perLoadgen || d.peakPerDaemon != tc.peakOn {
			t.Errorf("%q: %+v, want %d load generators of %d, %d daemons of at most %d", tc.args, d, tc.loadgens, tc.perLoadgen, tc.daemons, tc.peakOn)
		}
	}
}

func TestSpreadBadFlags(t *testing.T) {
	for _, args := range [][]string{{"rpc", "--loadgens", "2"}, {"watch", "--loadgens", "-1"}, {"storm", "--rolling"},
		{"conns", "--store", "etcd", "--daemons", "2", "--loadgens", "0"}, {"watch", "-n", "3", "--loadgens", "4"},
		{"storm", "--store", "etcd", "--daemons", "1", "--loadgens", "1", "--rolling"}, {"watch", "--resume"},
		{"failover", "--store", "etcd", "--daemons", "3", "--loadgens", "0", "--resume"},
		{"storm", "--idle-window"}, {"watch", "--idle-window", "--loadgens", "0"},
		{"watch", "--loadgens", "1", "--loadgen-nice", "20"}, {"watch", "--loadgens", "1", "--loadgen-nice", "-1"},
		{"rpc", "--loadgen-nice", "5"}, {"watch", "--agent-ping-timeout", "0s"}, {"storm", "--shed-latency", "-1s"}, {"conns", "--agent-key-exchange", "x25519"}} {
		o, err := parseOptions(args[0], args[1:], io.Discard, io.Discard)
		if err == nil {
			t.Errorf("%q: accepted (%+v)", args, o.division(o.totalAgents()))
		}
	}
}

func TestMergeServers(t *testing.T) {
	got := mergeServers([]string{"b", "c"}, []string{"a", "b", "c"})
	if !slices.Equal(got, []string{"b", "c", "a"}) {
		t.Errorf("mergeServers = %q", got)
	}
}

// Each load generator binds source addresses of its own.
func TestSourcePlanBase(t *testing.T) {
	p := sourcePlan{perAddr: 10, first: 100, base: 3}
	for i, want := range map[int]string{100: "127.0.0.5", 109: "127.0.0.5", 110: "127.0.0.6"} {
		if got := p.sourceAddr(i).String(); got != want {
			t.Errorf("agent %d: %s, want %s", i, got, want)
		}
	}
}
