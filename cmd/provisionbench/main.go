// Command provisionbench is provisiond's load generator: simulated agents
// drive a daemon through the real wire protocol (JSON RPC over a TLS
// websocket) and it reports throughput, latency percentiles and memory,
// each also as a ratio to a baseline measured in the same run.
//
//	provisionbench WORKLOAD [flags]
//
// Workloads:
//
//	rpc     N machine agents call Provisioner.Life / InstanceId on themselves in a closed loop
//	watch   N agents hold K watchers each; a driver adds containers at R/s; latency from the
//	        write being issued to Next returning, changes lost, spurious wake-ups
//	write   W concurrent writers (SetInstanceStatus, UpdateApplicationsUnits)
//	conns   N idle logged-in agents with 2 watchers each: daemon memory per connection
//	storm   N agents with watchers; the daemon restarts; time until all are back
//	churn   the reference agent provisions while machines, containers and pods are added and
//	        removed at a rate: start, removal and scale latencies, teardown
//	failover  N agents on each of D daemons on one etcd (--store etcd --daemons D); one daemon
//	        is killed (SIGKILL); time until its agents are back on the others with their watchers
//
// By default the tool starts a daemon itself, on a temporary data dir, as a
// child process (this binary re-executed, so the daemon's memory is its
// own); --daemon inproc runs it in this process, --daemon-bin runs a
// provisiond binary's "serve", and --credentials drives a running daemon:
// the machines a run adds to it (and the containers on them) are removed
// at the end, or, with --keep-machines, listed as left behind. --store etcd
// runs the self-started daemons on etcd (one member the tool starts, or
// --etcd-endpoints), --daemons N of them on one prefix (etcd.go).
// --loadgens N runs the agents of conns, watch, failover and storm in N
// load generator processes (loadgen.go, spreadruns.go), so that no process
// holds more sockets than its open file limit allows.
// See docs/performance.md and docs/benchmarks.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"flag"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usageText = `usage: provisionbench WORKLOAD [flags]

workloads:
  rpc     N machine agents call Provisioner.Life / InstanceId on themselves in a closed loop
  watch   N agents x K watchers; a driver adds containers at R/s; write-to-Next latency
  write   W concurrent writers (SetInstanceStatus, UpdateApplicationsUnits)
  conns   N idle logged-in agents with 2 watchers each: daemon memory per connection
  storm   N agents with watchers; the daemon restarts; time until all are back
  churn   the reference agent under machines, containers and pods added and removed at R/s
  failover  N agents on each of D daemons on one etcd; one daemon is killed; time until its
          agents are logged in with their watchers on the others

--loadgens N runs the agents of conns, watch, failover and storm in N processes, --daemons N
(with --store etcd) serves them from N daemons; by default as many as the open file limit needs.

Run "provisionbench WORKLOAD -h" for the flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	switch args[0] {
	case childDaemonCmd:
		return childDaemon(args[1:], stderr)
	case childEchoCmd:
		return childEcho(args[1:], stdout, stderr)
	case childEtcdCmd:
		return childEtcd(args[1:], stdout, stderr)
	case childHealthCmd:
		return childHealth(args[1:], os.Stdin, stdout, stderr)
	case childLoadgenCmd:
		return childLoadgen(os.Stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usageText)
		return 0
	}
	w, ok := workloads[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "provisionbench: unknown workload %q\n%s", args[0], usageText)
		return 2
	}
	if _, ok := stderr.(*os.File); !ok {
		// Child processes (daemons, etcd) copy their output to it
		// concurrently; a file takes that, a buffer needs a lock.
		stderr = &lockedWriter{w: stderr}
	}
	o, err := parseOptions(args[0], args[1:], stdout, stderr)
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "provisionbench: %v\n", err)
		return 2
	}
	if err := runWorkload(ctx, w, o); err != nil {
		fmt.Fprintf(stderr, "provisionbench: %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// options are the flags of every workload.
type options struct {
	workload string
	stdout   io.Writer
	stderr   io.Writer

	// missed are the targets a run missed that fail the tool once the
	// report is written (conns: agents' connections dropped), so that a
	// long run still reports its figures.
	missed []string

	json       bool
	repeat     int
	baseline   bool
	duration   time.Duration
	sizes      []int
	watchers   int
	rate       float64
	op         string
	settle     time.Duration
	bufferSize int
	dials      int // dials under way at once per process of agents (0: no bound)

	credentials string
	// keepMachines leaves the machines a --credentials run adds.
	keepMachines bool
	daemonPID    int
	daemonMode   string
	daemonBin    string
	dataDir      string
	cpuProfile   string
	windowProf   string
	genProfile   string
	memProfile   string
	loadgenGC    string // loadgenGCQuiet or loadgenGCGo (loadgengc.go)
	loadgenNice  int    // the load generators' nice value (nice.go)
	caasApps     int

	// The store of self-started daemons (etcd.go): bbolt, or etcd at
	// etcdEndpoints (none: the tool starts one member) under etcdPrefix,
	// shared by daemons daemons.
	store         string
	etcdEndpoints []string
	etcdPrefix    string
	daemons       int
	// loadgens is the load generator processes the agents run in
	// (loadgen.go; 0: this process); rolling restarts the daemons of a
	// storm one at a time.
	loadgens int
	rolling  bool
	// resume: failover's moved agents resume their watchers.
	resume bool
	// idleWindow: watch measures a window without changes first
	// (idlewindow.go).
	idleWindow bool
	// The given cluster's security (with etcdEndpoints), for the daemons
	// and the baselines alike.
	etcdSec etcdSecurity

	loginRateMax    int
	loginRateRefill time.Duration
	loginConcurrent int
	shedLatency     time.Duration
	drain           time.Duration
	rebalance       bool
	// agentPingTimeout is how long an agent's ping may take before its
	// client ends the connection (rpc/client's Config.PingTimeout).
	agentPingTimeout time.Duration
	// agentKeyExchange is what the agents' TLS handshakes offer
	// (keyExchangeGo or keyExchangeJuju).
	agentKeyExchange string
	setFlags         map[string]bool

	progress *progress
	sources  sourcePlan // the agents' loopback source addresses (limits.go)
}

// workload is one of the workloads: its default sizes, and run, which
// measures one size once. baseline, if set, measures the same size's
// baseline once.
type workload struct {
	sizeName string
	sizes    string
	describe func(o *options) map[string]any
	prepare  func(ctx context.Context, e *env, maxSize int) error
	run      func(ctx context.Context, e *env, size int) (*values, error)
	baseline func(ctx context.Context, e *env, size int) (*values, error)
	ratios   []ratio
	diffs    []ratio // figures that are the difference of two medians
	notes    func(o *options) []string
	// windows: each run has one measuring window the daemons'
	// --window-cpuprofile covers.
	windows bool
}

var workloads = map[string]*workload{
	"rpc":   rpcWorkload,
	"watch": watchWorkload,
	"write": writeWorkload,
	"conns": connsWorkload,
	"storm": stormWorkload,
	"churn": churnWorkload,

	"failover": failoverWorkload,
}

func parseOptions(name string, args []string, stdout, stderr io.Writer) (*options, error) {
	w := workloads[name]
	o := &options{workload: name, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("provisionbench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	sizes := fs.String("n", w.sizes, "comma-separated sizes ("+w.sizeName+"); one column each")
	fs.BoolVar(&o.json, "json", false, "print one JSON document instead of a table")
	fs.IntVar(&o.repeat, "repeat", 1, "runs of each size; figures are medians")
	fs.BoolVar(&o.baseline, "baseline", false, "measure the same-run baseline (echo, raw bbolt, idle connection memory) with each run")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measuring time of each run (rpc, watch, write)")
	fs.IntVar(&o.watchers, "watchers", 10, "watchers per agent (watch)")
	fs.Float64Var(&o.rate, "rate", 100, "changes per second the driver commits (watch), operations per second (churn)")
	fs.StringVar(&o.op, "op", "mixed", "write operation: status (SetInstanceStatus), units (UpdateApplicationsUnits) or mixed")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "wait before reading memory, and for late watcher events")
	fs.IntVar(&o.dials, "dials", defaultDials, "storm, failover: dials under way at once in each process of agents (each load generator; 0: no bound, as that many separate agents would dial)")
	fs.IntVar(&o.bufferSize, "buffer", 4096, "websocket read and write buffer size of each simulated agent, bytes")
	fs.StringVar(&o.credentials, "credentials", "", "drive the running daemon of this credentials.yaml instead of starting one")
	fs.BoolVar(&o.keepMachines, "keep-machines", false, "with --credentials: leave the machines the run adds (they are listed at the end) instead of removing them")
	fs.IntVar(&o.daemonPID, "daemon-pid", 0, "pid of the --credentials daemon, to read its memory from /proc (else its /metrics)")
	fs.StringVar(&o.daemonMode, "daemon", modeChild, "how to start the daemon: child (a child process) or inproc (in this process)")
	fs.StringVar(&o.daemonBin, "daemon-bin", "", "start this provisiond binary (\"serve\") as the daemon")
	fs.StringVar(&o.dataDir, "data-dir", "", "data dir of a self-started daemon (default: a new temporary dir)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the daemon's CPU profile (inproc: this whole process) to this file")
	fs.StringVar(&o.windowProf, "window-cpuprofile", "", "child daemons: a CPU profile of each measuring window of write and watch, to FILE.1, FILE.2, ..., and the heap profiles as it opens and closes, to FILE.1.start.heap and FILE.1.heap, ... (with --daemons, daemon K's to FILE.dK.1, ...)")
	fs.StringVar(&o.genProfile, "loadgen-cpuprofile", "", "write this process's CPU profile (the load generator: the agents and the driver) to this file")
	fs.StringVar(&o.loadgenGC, "loadgen-gc", loadgenGCQuiet, "this process's garbage collector in the measuring windows: quiet (collect before each window, none in it unless it allocates more than min(4 GiB, an eighth of the box's memory); not with --daemon inproc) or go (as $GOGC and $GOMEMLIMIT set it)")
	fs.StringVar(&o.memProfile, "memprofile", "", "child daemon: write its heap profile to this file (and FILE.1, FILE.2, ...) at each memory reading (conns); the echo server of --baseline to FILE.echo")
	fs.StringVar(&o.store, "store", daemon.StoreBolt, "store of the self-started daemons: bbolt or etcd")
	endpoints := fs.String("etcd-endpoints", "", "with --store etcd: etcd client URLs, comma-separated (default: the tool starts one etcd member)")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", "", "with --store etcd: key prefix of the controller (default: a new one per run, deleted at the end)")
	fs.StringVar(&o.etcdSec.caFile, "etcd-ca-file", "", "with --etcd-endpoints: CA certificate PEM etcd's certificate chains to")
	fs.StringVar(&o.etcdSec.certFile, "etcd-cert-file", "", "with --etcd-endpoints: client certificate PEM for etcd's --client-cert-auth (daemons and baselines)")
	fs.StringVar(&o.etcdSec.keyFile, "etcd-key-file", "", "with --etcd-endpoints: client key PEM, with --etcd-cert-file")
	fs.StringVar(&o.etcdSec.username, "etcd-username", "", "with --etcd-endpoints: etcd auth user (daemons and baselines)")
	fs.StringVar(&o.etcdSec.password, "etcd-password", os.Getenv(etcdPasswordEnv), "with --etcd-username: its password (default $"+etcdPasswordEnv+", which ps does not show)")
	fs.IntVar(&o.daemons, "daemons", 1, "with --store etcd: daemons serving the one controller; agents spread over them (default: one per 17,000 agents)")
	fs.IntVar(&o.loadgens, "loadgens", 0, "conns, watch, failover, storm: run the agents in this many load generator processes, each with its own loopback source addresses (0: in this process; default: one per 15,000 agents, and one for conns and storm over several daemons)")
	fs.BoolVar(&o.resume, "resume", false, "failover: the moved agents open their watchers again resumed after the revision their events covered (provisiond's from-revision, as the reference agent does) instead of afresh; runs the spread form (--loadgens 1 unless set)")
	fs.IntVar(&o.loadgenNice, "loadgen-nice", 0, "the load generator processes' scheduling priority, a nice value from 0 to 19: above 0 the daemons and etcd come first on the shared cores, as they would with the agents on machines of their own")
	fs.BoolVar(&o.idleWindow, "idle-window", false, "watch: first measure a window as long as --duration with every agent connected and no change (their pings, the daemons' upkeep), and give the per-change figures also less it (\"less idle\"); runs the spread form (--loadgens 1 unless set)")
	fs.StringVar(&o.agentKeyExchange, "agent-key-exchange", keyExchangeGo, "what the agents' TLS handshakes offer: go (this Go's defaults: the post-quantum hybrid X25519MLKEM768 first, which the daemon then uses) or juju (X25519 first, without the hybrid: what Juju's agents built with Go 1.21 offer)")
	fs.DurationVar(&o.agentPingTimeout, "agent-ping-timeout", client.DefaultPingTimeout, "how long an agent's ping (one a minute) may go unanswered before its client closes the connection: 30 s, as Juju's client; longer where the load generators themselves wait to run that long (their goroutines' waits are reported)")
	fs.BoolVar(&o.rolling, "rolling", false, "storm: restart the daemons one at a time (a rolling restart) instead of all together")
	d := daemon.Default("")
	fs.IntVar(&o.loginRateMax, "login-rate-max", d.LoginRateMax, "self-started daemon: agent login token bucket size")
	fs.DurationVar(&o.loginRateRefill, "login-rate-refill", d.LoginRateRefill, "self-started daemon: time to earn one login token")
	fs.IntVar(&o.loginConcurrent, "login-concurrent", d.LoginConcurrent, "self-started daemon: agent logins at once")
	fs.DurationVar(&o.shedLatency, "shed-latency", d.ShedLatency, "self-started daemon: refuse new connections while its goroutines' p99 wait to run is at least this (0: never)")
	fs.DurationVar(&o.drain, "drain", 0, "self-started daemons: on each stop (storm, storm --rolling), close the agents' connections spread over this long first, as provisiond's --drain (0: all at once)")
	fs.BoolVar(&o.rebalance, "rebalance", d.Rebalance, "self-started daemons on etcd: one over its share of the connections hands agents to one with room, as provisiond's --rebalance")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: provisionbench %s [flags]\n\nflags:\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.setFlags = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.setFlags[f.Name] = true })
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-n: bad size %q", s)
		}
		o.sizes = append(o.sizes, n)
	}
	switch {
	case o.repeat < 1:
		return nil, fmt.Errorf("--repeat must be at least 1")
	case o.duration <= 0:
		return nil, fmt.Errorf("--duration must be positive")
	case o.watchers < 1:
		return nil, fmt.Errorf("--watchers must be at least 1")
	case o.rate <= 0:
		return nil, fmt.Errorf("--rate must be positive")
	case o.op != "status" && o.op != "units" && o.op != "mixed":
		return nil, fmt.Errorf("--op must be status, units or mixed")
	case o.dials < 0:
		return nil, fmt.Errorf("--dials must be 0 (no bound) or more")
	case o.bufferSize < 256:
		return nil, fmt.Errorf("--buffer must be at least 256")
	case o.loadgenNice < 0 || o.loadgenNice > 19:
		return nil, fmt.Errorf("--loadgen-nice must be from 0 to 19 (a load generator may only give way)")
	case o.agentPingTimeout <= 0:
		return nil, fmt.Errorf("--agent-ping-timeout must be positive")
	case o.agentKeyExchange != keyExchangeGo && o.agentKeyExchange != keyExchangeJuju:
		return nil, fmt.Errorf("--agent-key-exchange must be go or juju")
	case o.shedLatency < 0:
		return nil, fmt.Errorf("--shed-latency must be 0 (never) or more")
	case o.drain < 0 || o.drain > time.Hour:
		return nil, fmt.Errorf("--drain must be from 0 (all at once) to 1h")
	case o.loadgenGC != loadgenGCQuiet && o.loadgenGC != loadgenGCGo:
		return nil, fmt.Errorf("--loadgen-gc must be %s or %s", loadgenGCQuiet, loadgenGCGo)
	}
	if *endpoints != "" {
		for _, ep := range strings.Split(*endpoints, ",") {
			o.etcdEndpoints = append(o.etcdEndpoints, strings.TrimSpace(ep))
		}
	}
	if err := o.resolveShape(); err != nil {
		return nil, err
	}
	if err := o.checkStore(); err != nil {
		return nil, err
	}
	if o.windowProf != "" {
		switch {
		case o.daemonMode != modeChild || o.credentials != "" || o.daemonBin != "":
			return nil, fmt.Errorf("--window-cpuprofile profiles the tool's own child daemons: drop --daemon inproc, --credentials and --daemon-bin")
		case !w.windows:
			return nil, fmt.Errorf("--window-cpuprofile: %s has no measuring window to profile (write and watch have)", name)
		case o.cpuProfile != "":
			return nil, fmt.Errorf("--window-cpuprofile and --cpuprofile: a process has one CPU profile at a time; choose one")
		}
	}
	if name == "write" && o.op != "status" {
		o.caasApps = maxInt(o.sizes)
	}
	var err error
	if o.sources, err = newSourcePlan(o.totalAgents()); err != nil {
		return nil, err
	}
	o.progress = newProgress(stderr)
	return o, nil
}

// daemonInProcess reports whether the daemon under test runs in this
// process (--daemon inproc, not overridden by --daemon-bin or
// --credentials).
func (o *options) daemonInProcess() bool {
	return o.daemonMode == modeInproc && o.credentials == "" && o.daemonBin == ""
}

func maxInt(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// daemonConfig applies the login limiter flags to an in-process daemon.
func (o *options) daemonConfig(c *daemon.Config) {
	c.LoginRateMax, c.LoginRateRefill, c.LoginConcurrent = o.loginRateMax, o.loginRateRefill, o.loginConcurrent
	c.ShedLatency = o.shedLatency
	c.Rebalance = o.rebalance
	if n := o.maxConnsFlag(); n > 0 {
		c.MaxConns = n
	}
}

// daemonFlags are the limiter flags of a child daemon (only those given,
// so a provisiond binary keeps its own defaults), and its connection cap
// where the default is below the run's agents (limits.go).
func (o *options) daemonFlags() []string {
	var out []string
	if o.setFlags["login-rate-max"] {
		out = append(out, "--login-rate-max", strconv.Itoa(o.loginRateMax))
	}
	if o.setFlags["login-rate-refill"] {
		out = append(out, "--login-rate-refill", o.loginRateRefill.String())
	}
	if o.setFlags["login-concurrent"] {
		out = append(out, "--login-concurrent", strconv.Itoa(o.loginConcurrent))
	}
	if o.setFlags["shed-latency"] {
		out = append(out, "--shed-latency", o.shedLatency.String())
	}
	if o.drain > 0 {
		out = append(out, "--drain", o.drain.String())
	}
	if !o.rebalance {
		out = append(out, "--rebalance=false")
	}
	if n := o.maxConnsFlag(); n > 0 {
		out = append(out, "--max-connections", strconv.Itoa(n))
	}
	return out
}

type machineInfo struct {
	Cores     int    `json:"cores"`
	GoVersion string `json:"go-version"`
	OS        string `json:"os"`
	// LoadStart and LoadEnd are the one-minute load average before the
	// run started anything and when it ended (-1: unknown, not Linux):
	// what else shared the cores, which the figures depend on. The end
	// counts the run's own processes too.
	LoadStart float64 `json:"load-start"`
	LoadEnd   float64 `json:"load-end"`
}

// loadAverage is the one-minute load average (/proc/loadavg), -1 if it
// cannot be read.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// env is what a workload runs with.
type env struct {
	o       *options
	t       *target // the first daemon: the fixture's, the driver's
	fix     *fixture
	echoSrv *echoServer

	cl       *cluster
	targets  []*target // every daemon (--daemons)
	agentsOn []*target // the daemons agents spread over (nil: every one)
	bolt     *env      // rpc's bbolt baseline in etcd mode
	lg       *loadgens // the load generator processes (--loadgens)
}

func runWorkload(ctx context.Context, w *workload, o *options) error {
	load := loadAverage() // before anything of the run's starts
	setDialSlots(o.dials)
	files, err := setFileLimit(o)
	if err != nil {
		return err
	}
	if err := checkDaemonFileLimit(o); err != nil {
		return err
	}
	// One CPU profile of this process: the in-process daemon's
	// (--cpuprofile) or the load generator's (--loadgen-cpuprofile).
	profile := ""
	if o.cpuProfile != "" && o.daemonInProcess() {
		profile = o.cpuProfile
	}
	if o.genProfile != "" {
		if o.cpuProfile != "" && o.daemonMode == modeInproc {
			return fmt.Errorf("--daemon inproc: --cpuprofile already profiles this process; drop --loadgen-cpuprofile")
		}
		profile = o.genProfile
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	o.progress.set("starting the daemon")
	cl, err := startCluster(ctx, o)
	if err != nil {
		return err
	}
	defer cl.close()
	t := cl.targets[0]
	e := &env{o: o, t: t, fix: newFixture(t, o), cl: cl, targets: cl.targets}
	defer e.fix.close()
	defer e.fix.cleanup() // before close: it uses the fixture's connections
	defer e.closeBaselines()
	defer func() { e.lg.close() }()
	rep := &Report{
		Workload: o.workload, Started: time.Now().UTC(), Daemon: t.describe(), Repeat: o.repeat,
		SizeName: w.sizeName, Parameters: w.describe(o),
		Machine: machineInfo{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadStart: load},
	}
	rep.Parameters["open-file-limit"] = files
	if o.loadgens > 0 || len(cl.targets) > 1 {
		div := o.division(o.totalAgents()).describe()
		rep.Parameters["division"] = div
		fmt.Fprintf(o.stderr, "provisionbench: %s\n", div)
	}
	if o.loadgenNice > 0 {
		rep.Parameters["loadgen-nice"] = o.loadgenNice
	}
	if o.agentKeyExchange != keyExchangeGo {
		rep.Parameters["agent-key-exchange"] = o.agentKeyExchange
	}
	if o.agentPingTimeout != client.DefaultPingTimeout {
		rep.Parameters["agent-ping-timeout"] = o.agentPingTimeout.String()
	}
	if o.setFlags["shed-latency"] && t.mode != modeExternal {
		rep.Parameters["daemon-shed-latency"] = o.shedLatency.String()
	}
	if o.drain > 0 && t.mode != modeExternal {
		rep.Parameters["daemon-drain"] = o.drain.String()
	}
	if !o.rebalance && t.mode != modeExternal {
		rep.Parameters["daemon-rebalance"] = "false"
	}
	if o.localAddr(t.addr, 0) != nil {
		rep.Parameters["agent-source-addresses"] = o.sources.describe()
	}
	if n := o.maxConnsFlag(); n > 0 && t.mode != modeExternal {
		rep.Parameters["daemon-max-connections"] = n
	}
	if w.prepare != nil {
		if err := w.prepare(ctx, e, maxInt(o.sizes)); err != nil {
			return err
		}
	}
	for _, size := range o.sizes {
		var runs, bases []*values
		for r := range o.repeat {
			o.progress.set(fmt.Sprintf("%s %d %s: run %d of %d", o.workload, size, w.sizeName, r+1, o.repeat))
			e.openEnds() // before the run's agents: connends.go
			v, err := w.run(ctx, e, size)
			if err != nil {
				return fmt.Errorf("%d %s: %w", size, w.sizeName, err)
			}
			runs = append(runs, v)
			if o.baseline && w.baseline != nil {
				o.progress.set(fmt.Sprintf("%s %d %s: baseline %d of %d", o.workload, size, w.sizeName, r+1, o.repeat))
				b, err := w.baseline(ctx, e, size)
				if err != nil {
					return fmt.Errorf("baseline at %d %s: %w", size, w.sizeName, err)
				}
				bases = append(bases, b)
			}
		}
		rep.Sizes = append(rep.Sizes, collect(size, runs, bases, w.ratios, w.diffs))
	}
	if w.notes != nil {
		rep.Notes = w.notes(o)
	}
	rep.Notes = append(rep.Notes, spreadNotes(o)...)
	o.progress.done()
	rep.Machine.LoadEnd = loadAverage()
	if o.json {
		if err := rep.writeJSON(o.stdout); err != nil {
			return err
		}
		return o.missedErr()
	}
	rep.writeTable(o.stdout)
	return o.missedErr()
}

// missedErr is the error of the targets the runs missed (options.missed).
func (o *options) missedErr() error {
	if len(o.missed) == 0 {
		return nil
	}
	return errors.New(strings.Join(o.missed, "; "))
}

func (t *target) describe() string {
	if t.etcd != nil {
		return t.describeMode() + ", etcd store"
	}
	return t.describeMode()
}

func (t *target) describeMode() string {
	switch t.mode {
	case modeExternal:
		return "external " + t.addr
	case modeBin:
		return "provisiond binary, child process"
	case modeInproc:
		return "in this process"
	default:
		return "child process"
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
