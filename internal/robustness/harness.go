package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemonproc"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/robustness/checker"
	"github.com/provisiond/provisiond/rpc/client"
)

// Config is one run.
type Config struct {
	// Provisiond is the built daemon; Etcd the built program that runs
	// one etcd member given etcdtest.MemberFlag (cmd/etcdcluster).
	Provisiond, Etcd string
	// Dir holds the members' and daemons' data.
	Dir string
	// Seed draws the fault schedule and the workload's choices.
	Seed uint64
	// Duration is how long the workload and the faults run.
	Duration time.Duration
	// Members and Daemons are how many etcd members and daemons (3, 3).
	Members, Daemons int
	// Env is added to the daemons' environment (e.g. a failpoint).
	Env []string
	// LaterEnv is added to the daemons' environment once the controller
	// is set up (each daemon is restarted with it): a planted bug that
	// would stop a new controller from initialising itself.
	LaterEnv []string
	// Failpoints says Provisiond was built with -tags failpoints: the
	// faults then include crashes at the stores' failpoints.
	Failpoints bool
	// FaultKinds, if set, are the only fault kinds drawn (FaultKinds and
	// FaultCrashAt+POINT); else every kind is (crashes at failpoints only
	// with Failpoints).
	FaultKinds []string
	// NoNetns keeps every daemon in the harness's network namespace even
	// when the run is root (netns.go): partitions are then the proxies'.
	NoNetns bool
	// NoFaults runs the workload without injecting any (a baseline).
	NoFaults bool
	// Resumed holds a watcher of kind checker.KindModelResumed on each
	// daemon (a WatchModel resumed from a revision across reconnects).
	Resumed bool
	// SettleWait and AgreeWait, if set, replace the settle phase's
	// bounds (settleWait, agreeWait): a run with a planted bug, which
	// may never settle or agree, need not wait the whole of them.
	SettleWait, AgreeWait time.Duration
	// Logf, if set, logs the run's progress.
	Logf func(format string, args ...any)
}

// Result is what a run recorded and what the checker found in it.
type Result struct {
	History   *checker.History
	Anomalies []checker.Anomaly
	Summary   checker.Summary
	Elapsed   time.Duration
}

// Timeouts of the harness's bounded waits.
const (
	startTimeout = 60 * time.Second // a daemon's serving line; a member's restart
	callTimeout  = 5 * time.Second  // one API call or dial (etcd requests time out after 2s)
	leaseTTL     = 2 * time.Second  // the daemons' --etcd-lease-ttl
	settleWait   = 60 * time.Second // the final reads and the watchers' last delivery
	// agreeWait bounds the rounds of final reads until the daemons agree:
	// every daemon has applied everything by its barrier write, so only a
	// write a resumed daemon sent late may still be landing.
	agreeWait = 10 * time.Second
)

// harness is one run's state.
type harness struct {
	cfg     Config
	t0      time.Time
	etcd    *etcdtest.Processes
	daemons []*daemon
	creds   *credentials.Credentials
	rec     *recorder

	// lastAck is the time (since t0) of the latest acknowledged write:
	// the fault injector waits for one after each fault.
	lastAck atomic.Int64
}

// now is the time since the run started, the history's clock.
func (h *harness) now() int64 { return int64(time.Since(h.t0)) }

func (h *harness) logf(format string, args ...any) {
	if h.cfg.Logf != nil {
		h.cfg.Logf(format, args...)
	}
}

// daemon is one provisiond process, restarted on its port and data dir.
type daemon struct {
	name    string
	dataDir string
	addr    string // a fixed loopback port, kept across restarts

	proxies []*etcdtest.Proxy // its links to the members (etcdtest.Proxy), one per member
	ns      *netns            // its network namespace (netns.go), nil if it runs in the harness's

	env []string // more environment, from Config.LaterEnv after setup

	mu     sync.Mutex
	proc   *daemonproc.Process // nil while down
	paused bool
}

// endpoints are the daemon's etcd endpoints: its proxies.
func (d *daemon) endpoints() string {
	eps := make([]string, len(d.proxies))
	for i, p := range d.proxies {
		eps[i] = p.URL()
	}
	return strings.Join(eps, ",")
}

func (d *daemon) process() *daemonproc.Process {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.proc
}

// Run starts the cluster and the daemons, runs the workload under faults
// for cfg.Duration, settles, and checks the history. An error is the
// harness failing to do its job; anomalies are in Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Members == 0 {
		cfg.Members = 3
	}
	if cfg.Daemons == 0 {
		cfg.Daemons = 3
	}
	if cfg.SettleWait == 0 {
		cfg.SettleWait = settleWait
	}
	if cfg.AgreeWait == 0 {
		cfg.AgreeWait = agreeWait
	}
	h := &harness{cfg: cfg, t0: time.Now()}
	h.rec = &recorder{h: h}
	res := Result{}

	etcd, err := etcdtest.StartProcesses(cfg.Etcd, etcdtest.Options{Dir: filepath.Join(cfg.Dir, "etcd"), Members: cfg.Members, NoFsync: true})
	if err != nil {
		return res, err
	}
	h.etcd = etcd
	defer etcd.Close()
	defer h.closeProxies()
	defer h.removeNetns() // after the daemons are killed
	defer h.stopDaemons()
	why := "NoNetns"
	if !cfg.NoNetns {
		why = netnsReason()
	}
	if why == "" {
		h.logf("robustness: each daemon in a network namespace of its own: partitions cut its link")
	} else {
		h.logf("robustness: partitions through loopback proxies (no network namespaces: %s)", why)
	}
	prefix, octet := netnsPrefix()
	for i := range cfg.Daemons {
		d := &daemon{name: "d" + strconv.Itoa(i), dataDir: filepath.Join(cfg.Dir, "d"+strconv.Itoa(i))}
		h.daemons = append(h.daemons, d)
		listen := "127.0.0.1"
		if why == "" {
			if d.ns, err = newNetns(prefix, octet, i); err != nil {
				return res, err
			}
			// Its own namespace: any port is free there.
			listen, d.addr = d.ns.hostIP, net.JoinHostPort(d.ns.peerIP, "17070")
		} else {
			port, err := freePort()
			if err != nil {
				return res, err
			}
			d.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
		for _, ep := range etcd.Endpoints() {
			p, err := etcdtest.NewProxy(listen, ep)
			if err != nil {
				return res, err
			}
			d.proxies = append(d.proxies, p)
		}
	}
	// The first initialises the controller; the others join it.
	for _, d := range h.daemons {
		if err := h.startDaemon(ctx, d); err != nil {
			return res, err
		}
	}
	if h.creds, err = credentials.Read(filepath.Join(h.daemons[0].dataDir, credentials.File)); err != nil {
		return res, err
	}
	w, err := h.setup(ctx)
	if err != nil {
		return res, fmt.Errorf("setup: %w", err)
	}
	if len(cfg.LaterEnv) > 0 {
		for _, d := range h.daemons {
			p := d.process()
			if err := p.Kill(); err != nil {
				return res, err
			}
			d.env = cfg.LaterEnv
			if err := h.startDaemon(ctx, d); err != nil {
				return res, err
			}
		}
	}
	h.logf("robustness: seed %d: %d etcd members, %d daemons, %d machines; running %s", cfg.Seed, cfg.Members, cfg.Daemons, len(w.machines), cfg.Duration)

	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var wg sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var watchers []*watcherRun
	for _, d := range h.daemons {
		for _, wr := range w.newWatchers(d) {
			watchers = append(watchers, wr)
			wg.Go(func() { wr.run(watchCtx, w) })
		}
	}
	var workers sync.WaitGroup
	w.start(runCtx, &workers)
	var faultErr error
	if !cfg.NoFaults {
		faultErr = h.injectFaults(runCtx)
	}
	<-runCtx.Done()
	workers.Wait()
	// Everything healed, every daemon up: the final reads and the
	// watchers' last delivery.
	if err := h.healAll(ctx); err != nil {
		stopWatch()
		wg.Wait()
		return res, errors.Join(faultErr, err)
	}
	settleStart := time.Now()
	settleErr := w.settle(ctx, watchers)
	stopWatch()
	wg.Wait()
	h.logf("robustness: settled in %s", time.Since(settleStart).Round(time.Millisecond))

	w.resolveEntities()
	hist := &checker.History{Seed: cfg.Seed, Ops: h.rec.ops, Faults: h.rec.faults}
	for _, wr := range watchers {
		hist.Streams = append(hist.Streams, wr.streams...)
	}
	recoveries(hist)
	res.History = hist
	res.Elapsed = time.Since(h.t0)
	res.Summary = checker.Summarize(hist)
	checkStart := time.Now()
	res.Anomalies = checker.Check(hist)
	h.logf("robustness: checked in %s", time.Since(checkStart).Round(time.Millisecond))
	return res, errors.Join(faultErr, settleErr)
}

// freePort picks a free loopback port for a daemon (kept across its
// restarts, so that clients find it again).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startDaemon runs d on the cluster and waits until it serves. A daemon
// that exits before it serves (etcd did not answer it in time: a
// member just restarted, a loaded box) is started again, as its service
// manager would, up to startTries times within startTimeout.
func (h *harness) startDaemon(ctx context.Context, d *daemon) error {
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for try := 1; ; try++ {
		p, err := h.spawnDaemon(d, nil)
		if err != nil {
			return err
		}
		if _, err := p.WaitServing(sctx); err != nil {
			_ = p.Kill()
			if p.Exited() && try < startTries && sctx.Err() == nil {
				h.logf("robustness: daemon %s exited before serving; starting it again", d.name)
				continue
			}
			return fmt.Errorf("daemon %s: %w", d.name, err)
		}
		d.mu.Lock()
		d.proc, d.paused = p, false
		d.mu.Unlock()
		return nil
	}
}

// startTries is how many times startDaemon starts a daemon that exits
// before it serves.
const startTries = 3

// spawnDaemon starts d's process with more environment env.
func (h *harness) spawnDaemon(d *daemon, env []string) (*daemonproc.Process, error) {
	var wrap []string
	if d.ns != nil {
		wrap = d.ns.wrap()
	}
	return daemonproc.StartIn(wrap, h.cfg.Provisiond, d.dataDir, slices.Concat(h.cfg.Env, d.env, env),
		"--store", "etcd", "--etcd-endpoints", d.endpoints(), "--etcd-prefix", "/robust/",
		"--etcd-lease-ttl", leaseTTL.String(), "--etcd-request-timeout", "2s", "--etcd-compaction-interval", "-1s",
		"--etcd-max-txn-ops", "1024", "--etcd-max-request-bytes", "8388608", "--addr", d.addr)
}

// stopDaemons kills every daemon (the end of the run, or a failure).
func (h *harness) stopDaemons() {
	for _, d := range h.daemons {
		d.mu.Lock()
		if d.proc != nil {
			_ = d.proc.Kill()
			d.proc = nil
		}
		d.mu.Unlock()
	}
}

// removeNetns removes the daemons' namespaces (after the daemons).
func (h *harness) removeNetns() {
	for _, d := range h.daemons {
		if d.ns != nil {
			d.ns.remove()
		}
	}
}

// partition cuts d off from etcd (true) or heals it (false): in the
// kernel if it has a namespace of its own, else through its proxies.
func (d *daemon) partition(cut bool) error {
	if d.ns != nil {
		return d.ns.cut(cut)
	}
	for _, p := range d.proxies {
		p.Block(cut)
	}
	return nil
}

// resetLinks closes d's connections to every member.
func (d *daemon) resetLinks() {
	for _, p := range d.proxies {
		p.Reset()
	}
}

// closeProxies ends every daemon's links (after the daemons).
func (h *harness) closeProxies() {
	for _, d := range h.daemons {
		for _, p := range d.proxies {
			p.Close()
		}
	}
}

// dial connects to daemon d and logs in: as the admin user (agent false)
// or as the controller agent, on the default model.
func (h *harness) dial(ctx context.Context, d *daemon, agent bool) (*client.Conn, error) {
	return h.dialModel(ctx, d, agent, h.creds.DefaultModelUUID)
}

// dialModel is dial on the model whose UUID is model.
func (h *harness) dialModel(ctx context.Context, d *daemon, agent bool, model string) (*client.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addr: d.addr, ModelUUID: model,
		CACert: []byte(h.creds.CACert), DialTimeout: callTimeout})
	if err != nil {
		return nil, err
	}
	if agent {
		_, err = c.LoginControllerAgent(ctx, h.creds)
	} else {
		_, err = c.LoginAdmin(ctx, h.creds)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// historyFile writes a history where it outlives the test's temporary
// directory and returns its path.
func historyFile(h *checker.History) (string, error) {
	dir := os.Getenv("ROBUSTNESS_HISTORY_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, fmt.Sprintf("robustness-seed%d-*.json", h.Seed))
	if err != nil {
		return "", err
	}
	f.Close()
	return f.Name(), h.Write(f.Name())
}

// newRand is the run's random source for one purpose (the same seed
// gives each purpose the same sequence).
func newRand(seed uint64, purpose uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, purpose))
}
