package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/state/store/etcdstore/rawetcd"
)

// Etcd mode (--store etcd): the self-started daemons run on etcd, the
// endpoints given by --etcd-endpoints or one member the tool starts (a
// child process, this binary re-executed with childEtcdCmd, unless the
// daemon runs in this process), under one prefix; --daemons N of them
// make one controller, and the agents spread over them. The baselines
// are etcd's own client doing the equivalent work in the same run
// (state/store/etcdstore/rawetcd), and, for rpc, the same workload on a
// bbolt daemon.

// childEtcdCmd is the hidden command that runs the tool's etcd member.
const childEtcdCmd = "internal-etcd"

// checkStore checks the store flags against each other and the workload.
func (o *options) checkStore() error {
	switch o.store {
	case daemon.StoreBolt, daemon.StoreEtcd:
	default:
		return fmt.Errorf("--store %q: want %s or %s", o.store, daemon.StoreBolt, daemon.StoreEtcd)
	}
	etcd := o.store == daemon.StoreEtcd
	switch {
	case !etcd && len(o.etcdEndpoints) > 0:
		return errors.New("--etcd-endpoints needs --store etcd")
	case !etcd && o.etcdPrefix != "":
		return errors.New("--etcd-prefix needs --store etcd")
	case o.daemons < 1:
		return errors.New("--daemons must be at least 1")
	case !etcd && o.daemons > 1:
		return errors.New("--daemons needs --store etcd: several daemons are one controller only on etcd")
	case o.credentials != "" && (etcd || o.setFlags["daemons"]):
		return errors.New("--credentials drives a running daemon on its own store: drop --store, --etcd-* and --daemons")
	case o.etcdPrefix != "" && (!strings.HasPrefix(o.etcdPrefix, "/") || !strings.HasSuffix(o.etcdPrefix, "/")):
		return fmt.Errorf("--etcd-prefix %q: must start and end with /", o.etcdPrefix)
	}
	switch sec := o.etcdSec; {
	case sec.secured() && len(o.etcdEndpoints) == 0:
		return errors.New("--etcd-ca-file, --etcd-cert-file, --etcd-key-file and --etcd-username need --etcd-endpoints: the etcd member the tool starts has neither TLS nor auth")
	case (sec.certFile == "") != (sec.keyFile == ""):
		return errors.New("--etcd-cert-file and --etcd-key-file go together")
	case sec.username == "" && o.setFlags["etcd-password"]:
		return errors.New("--etcd-password needs --etcd-username")
	}
	for _, ep := range o.etcdEndpoints {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			return fmt.Errorf("--etcd-endpoints %q: want http:// or https:// URLs", ep)
		}
	}
	switch o.workload {
	case "churn":
		if o.daemons > 1 {
			return fmt.Errorf("%s runs on one daemon: --daemons must be 1", o.workload)
		}
	case "failover":
		switch {
		case o.credentials != "":
			return errors.New("failover kills a daemon: let the tool start them (no --credentials)")
		case !etcd || o.daemons < 2:
			return errors.New("failover needs daemons to fail over to: --store etcd --daemons 3 (at least 2)")
		case o.daemonMode == modeInproc && o.daemonBin == "":
			return errors.New("failover kills a daemon with SIGKILL: it needs child daemons (--daemon child or --daemon-bin), not --daemon inproc")
		}
	}
	return nil
}

// etcdPasswordEnv holds the etcd password: the tool's default for
// --etcd-password, and how a child daemon (or provisiond serve) is given
// it, out of sight of ps.
const etcdPasswordEnv = "PROVISIOND_ETCD_PASSWORD"

// flags are a child daemon's (or provisiond serve's) store flags; the
// password goes in its environment (env).
func (et *etcdTarget) flags() []string {
	if et == nil {
		return nil
	}
	out := []string{"--store", daemon.StoreEtcd, "--etcd-endpoints", strings.Join(et.endpoints, ","), "--etcd-prefix", et.prefix}
	for _, f := range [][2]string{{"--etcd-ca-file", et.caFile}, {"--etcd-cert-file", et.certFile}, {"--etcd-key-file", et.keyFile}, {"--etcd-username", et.username}} {
		if f[1] != "" {
			out = append(out, f[0], f[1])
		}
	}
	if et.maxTxnOps > 0 {
		out = append(out, "--etcd-max-txn-ops", strconv.Itoa(et.maxTxnOps))
	}
	if et.maxRequestBytes > 0 {
		out = append(out, "--etcd-max-request-bytes", strconv.Itoa(et.maxRequestBytes))
	}
	return out
}

// env is a child daemon's environment: this process's, with the etcd
// password if there is one.
func (et *etcdTarget) env() []string {
	if et == nil || et.password == "" {
		return nil
	}
	return append(os.Environ(), etcdPasswordEnv+"="+et.password)
}

// conn is how the tool's own clients (the baselines, the clean-up) reach
// the cluster: as the daemons do.
func (et *etcdTarget) conn() rawetcd.Conn {
	return rawetcd.Conn{Endpoints: et.endpoints, TLS: et.tls, Username: et.username, Password: et.password}
}

// rawPrefix is where the raw etcd baselines write: beside the daemons'
// prefix, not under it (the daemons watch everything under theirs).
func (et *etcdTarget) rawPrefix() string { return strings.TrimSuffix(et.prefix, "/") + "-raw/" }

// cluster is the daemons of a run and the etcd they run on.
type cluster struct {
	targets []*target
	etcd    *etcdTarget // nil: bbolt
	// ownPrefix: the tool chose the prefix on endpoints it was given, so
	// it deletes it at the end.
	ownPrefix bool
	stopEtcd  func()
}

// startCluster starts the run's daemons (and the etcd they need).
func startCluster(ctx context.Context, o *options) (*cluster, error) {
	cl := &cluster{}
	if o.store != daemon.StoreEtcd {
		t, err := startTarget(ctx, o, o.mainSpec())
		if err != nil {
			return nil, err
		}
		cl.targets = []*target{t}
		return cl, nil
	}
	et := &etcdTarget{endpoints: o.etcdEndpoints, prefix: o.etcdPrefix, etcdSecurity: o.etcdSec}
	if et.caFile != "" || et.certFile != "" {
		tc, err := etcdstore.ClientTLS(et.caFile, et.certFile, et.keyFile)
		if err != nil {
			return nil, err
		}
		et.tls = tc
	}
	if len(et.endpoints) == 0 {
		o.progress.set("starting etcd")
		eps, pid, stop, err := startEtcd(ctx, o)
		if err != nil {
			return nil, err
		}
		et.endpoints, et.pid, cl.stopEtcd = eps, pid, stop
		et.maxTxnOps, et.maxRequestBytes = etcdtest.MaxTxnOps, etcdtest.MaxRequestBytes
	}
	if et.prefix == "" {
		b := make([]byte, 6)
		_, _ = cryptoRand(b)
		et.prefix = "/provisionbench-" + hex.EncodeToString(b) + "/"
		cl.ownPrefix = cl.stopEtcd == nil
	}
	cl.etcd = et
	// The first daemon makes the controller; the others join it.
	for k := range o.daemons {
		spec := targetSpec{index: k, etcd: et}
		if k == 0 {
			spec = o.mainSpec()
			spec.etcd = et
		} else {
			if o.cpuProfile != "" {
				spec.cpuProfile = fmt.Sprintf("%s.d%d", o.cpuProfile, k)
			}
			if o.windowProf != "" {
				spec.windowProfile = fmt.Sprintf("%s.d%d", o.windowProf, k)
			}
		}
		if o.dataDir != "" && o.daemons > 1 {
			spec.dataDir = filepath.Join(o.dataDir, fmt.Sprintf("daemon-%d", k))
		}
		o.progress.set(fmt.Sprintf("starting daemon %d of %d", k+1, o.daemons))
		t, err := startTarget(ctx, o, spec)
		if err != nil {
			cl.close()
			return nil, fmt.Errorf("daemon %d: %w", k, err)
		}
		cl.targets = append(cl.targets, t)
	}
	return cl, nil
}

func (cl *cluster) close() {
	for _, t := range cl.targets {
		t.close()
	}
	if cl.ownPrefix {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rawetcd.DeletePrefix(ctx, cl.etcd.conn(), cl.etcd.prefix)
		// and the prefix's registration (etcdstore.ClaimPrefix), which
		// no registration can be under: it would nest.
		_ = rawetcd.DeletePrefix(ctx, cl.etcd.conn(), etcdstore.RegistryKey(cl.etcd.prefix))
	}
	if cl.stopEtcd != nil {
		cl.stopEtcd()
	}
}

// startEtcd starts one etcd member (fsync on, etcd's default) on loopback:
// in this process when the daemon is, else as a child process (whose pid
// it returns; 0 in this process).
func startEtcd(ctx context.Context, o *options) ([]string, int, func(), error) {
	dir, err := os.MkdirTemp("", "provisionbench-etcd-")
	if err != nil {
		return nil, 0, nil, err
	}
	if o.daemonMode == modeInproc && o.daemonBin == "" {
		c, err := etcdtest.Start(etcdtest.Options{Dir: dir})
		if err != nil {
			os.RemoveAll(dir)
			return nil, 0, nil, err
		}
		return c.Endpoints(), 0, func() { c.Close(); os.RemoveAll(dir) }, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, 0, nil, err
	}
	cmd := exec.Command(self, childEtcdCmd, "--dir", dir)
	cmd.Stderr = o.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waitOrKill(cmd, 30*time.Second)
		os.RemoveAll(dir)
	}
	line, err := readLine(ctx, out)
	if err != nil {
		stop()
		return nil, 0, nil, fmt.Errorf("etcd: %w", err)
	}
	eps, ok := strings.CutPrefix(line, "listening ")
	if !ok {
		stop()
		return nil, 0, nil, fmt.Errorf("etcd said %q", line)
	}
	return strings.Split(eps, ","), cmd.Process.Pid, stop, nil
}

// childEtcd is the hidden command that runs the tool's etcd member; it
// prints "listening URL" and serves until SIGTERM.
func childEtcd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(childEtcdCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	c, err := etcdtest.Start(etcdtest.Options{Dir: *dir})
	if err != nil {
		fmt.Fprintln(stderr, "provisionbench etcd:", err)
		return 1
	}
	fmt.Fprintf(stdout, "listening %s\n", strings.Join(c.Endpoints(), ","))
	<-sigs
	c.Close()
	return 0
}

// agentTarget is the daemon agent i connects to: round robin over the
// daemons the workload puts agents on.
func (e *env) agentTarget(i int) *target {
	on := e.agentsOn
	if len(on) == 0 {
		on = e.targets
	}
	if len(on) == 0 {
		return e.t
	}
	return on[i%len(on)]
}

// etcdPID is the tool's etcd member's process, when it is a child of
// this process; else 0.
func (e *env) etcdPID() int {
	if e.etcdMode() {
		return e.cl.etcd.pid
	}
	return 0
}

// daemonPIDs are the processes whose CPU is the daemons': every daemon.
func (e *env) daemonPIDs() []int {
	var pids []int
	for _, t := range e.targets {
		if t.pid != 0 {
			pids = append(pids, t.pid)
		}
	}
	return pids
}

// boltBaseline is the rpc baseline of etcd mode: the same workload on a
// bbolt daemon started the same way, once per run of the tool.
func (e *env) boltBaseline(ctx context.Context) (*env, error) {
	if e.bolt != nil {
		return e.bolt, nil
	}
	e.o.progress.set("starting the bbolt daemon of the baseline")
	t, err := startTarget(ctx, e.o, targetSpec{})
	if err != nil {
		return nil, fmt.Errorf("bbolt daemon: %w", err)
	}
	e.bolt = &env{o: e.o, t: t, fix: newFixture(t, e.o), targets: []*target{t}}
	return e.bolt, nil
}

func (e *env) closeBaselines() {
	if e.bolt != nil {
		e.bolt.fix.close()
		e.bolt.t.close()
	}
	if e.echoSrv != nil {
		e.echoSrv.close()
	}
}

// etcdMode reports whether the run's daemons are on etcd.
func (e *env) etcdMode() bool { return e.cl != nil && e.cl.etcd != nil }

// runRPCBoltBaseline runs rpc's closed loop on the bbolt daemon: its
// figures are the baseline's, named "bbolt ...".
func runRPCBoltBaseline(ctx context.Context, e *env, n int) (*values, error) {
	be, err := e.boltBaseline(ctx)
	if err != nil {
		return nil, err
	}
	v, err := runRPC(ctx, be, n)
	if err != nil {
		return nil, err
	}
	return v.prefixed("bbolt "), nil
}

// prefixed is v with every name prefixed.
func (v *values) prefixed(p string) *values {
	out := newValues()
	for _, name := range v.order {
		out.set(p+name, v.unit[name], v.m[name])
	}
	return out
}

// runWriteEtcdBaseline measures raw etcd transactions with the same
// number of writers, through as many etcd clients as there are daemons
// (each daemon has one); with one writer also the echo round trip of the
// same message, and their sum.
func runWriteEtcdBaseline(ctx context.Context, e *env, n int) (*values, error) {
	et := e.cl.etcd
	const valueSize = 512 // about a machine status record, as raw bbolt's
	cpu := newCPUWindow(nil, et, e.o.newToolWindow())
	r, err := rawetcd.TxnBench(ctx, et.conn(), et.rawPrefix(), n, len(e.targets), valueSize, warmup(e.o.duration), e.o.duration, cpu.mark)
	if err != nil {
		return nil, fmt.Errorf("raw etcd: %w", err)
	}
	v := newValues()
	v.set("raw etcd txn/s", "", r.PerSecond())
	v.set("raw etcd txn p50", "ms", ms(percentile(r.Latencies, 50)))
	v.set("raw etcd txn p99", "ms", ms(percentile(r.Latencies, 99)))
	cpu.set(v, "raw etcd txn: ", "txn", float64(r.Commits), "µs")
	if n == 1 && r.PerSecond() > 0 {
		echo, err := echoRoundTrips(ctx, e)
		if err != nil {
			return nil, err
		}
		v.set("echo round trips/s", "", echo)
		if echo > 0 {
			v.set("raw etcd txn + echo writes/s", "", 1/(1/r.PerSecond()+1/echo))
		}
	}
	return v, ctx.Err()
}

// runWatchEtcdBaseline is etcd's own watch at the same shape: one key per
// agent, --watchers watches on each (on etcd's gRPC watch streams, one per
// client, a client per agent up to 64), one more client putting at --rate.
func runWatchEtcdBaseline(ctx context.Context, e *env, n int) (*values, error) {
	et := e.cl.etcd
	win := e.o.newToolWindow() // its clients run in this process: the run is one window
	win.mark(true)
	r, err := rawetcd.WatchBench(ctx, et.conn(), et.rawPrefix(), n, e.o.watchers, min(n, 64), e.o.rate, e.o.duration, e.o.settle)
	win.mark(false)
	if err != nil {
		return nil, fmt.Errorf("raw etcd watch: %w", err)
	}
	v := newValues()
	v.set("etcd watchers", "", float64(n*e.o.watchers))
	v.set("etcd puts/s", "", float64(r.Puts)/r.Elapsed.Seconds())
	v.set("etcd p50 latency", "ms", ms(percentile(r.Latencies, 50)))
	v.set("etcd p99 latency", "ms", ms(percentile(r.Latencies, 99)))
	v.set("etcd max latency", "ms", ms(percentile(r.Latencies, 100)))
	v.set("etcd lost", "", float64(r.Lost))
	return v, ctx.Err()
}
