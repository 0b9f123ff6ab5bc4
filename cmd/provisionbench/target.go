package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/charm"
	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// How the daemon under test runs.
const (
	modeChild    = "child"    // this binary re-executed as a daemon (default)
	modeInproc   = "inproc"   // daemon.Start in this process
	modeBin      = "bin"      // --daemon-bin: a provisiond binary, "serve"
	modeExternal = "external" // --credentials: a daemon someone else runs
)

// childDaemonCmd is the hidden command that runs the daemon in a child
// process; childEchoCmd runs the baseline echo server.
const (
	childDaemonCmd = "internal-daemon"
	childEchoCmd   = "internal-echo"
)

// caasModelName is the CAAS model a self-started daemon is seeded with,
// holding applications bench-w0 ... for the write workload.
const caasModelName = "bench-k8s"

// target is the daemon under test.
type target struct {
	mode     string
	addr     string
	dataDir  string
	ownsDir  bool
	creds    *credentials.Credentials
	pid      int           // of the daemon process, when known
	lastStop time.Duration // how long the last restart took to stop the daemon

	caasApps   int // seeded applications (self-started daemons only)
	caasModel  string
	inproc     *daemon.Daemon
	inprocCfg  daemon.Config
	cmd        *exec.Cmd
	cmdArgs    []string
	cpuProfile string
	exited     chan struct{} // closed when the child has exited
	waitErr    error         // its exit status, once exited is closed
	httpc      *http.Client
	logw       io.Writer
}

// startTarget starts (or, with --credentials, finds) the daemon.
func startTarget(ctx context.Context, o *options) (*target, error) {
	t := &target{caasApps: o.caasApps, cpuProfile: o.cpuProfile, logw: o.stderr}
	switch {
	case o.credentials != "":
		t.mode = modeExternal
		c, err := credentials.Read(o.credentials)
		if err != nil {
			return nil, err
		}
		if len(c.APIAddresses) == 0 {
			return nil, fmt.Errorf("%s lists no API address", o.credentials)
		}
		t.creds, t.addr, t.pid, t.caasApps = c, c.APIAddresses[0], o.daemonPID, 0
		t.setHTTP()
		return t, nil
	case o.daemonBin != "":
		t.mode = modeBin
	default:
		t.mode = o.daemonMode
	}
	t.dataDir = o.dataDir
	if t.dataDir == "" {
		dir, err := os.MkdirTemp("", "provisionbench-")
		if err != nil {
			return nil, err
		}
		t.dataDir, t.ownsDir = dir, true
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	t.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	switch t.mode {
	case modeInproc:
		cfg := daemon.Default(t.dataDir)
		cfg.Addr = t.addr
		o.daemonConfig(&cfg)
		t.inprocCfg = cfg
	case modeChild:
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		t.cmdArgs = append([]string{self, childDaemonCmd, "--data-dir", t.dataDir, "--addr", t.addr,
			"--caas-apps", strconv.Itoa(t.caasApps), "--cpuprofile", o.cpuProfile, "--memprofile", o.memProfile}, o.daemonFlags()...)
	case modeBin:
		t.caasApps = 0 // the API cannot deploy applications yet
		t.cmdArgs = append([]string{o.daemonBin, "serve", "--data-dir", t.dataDir, "--addr", t.addr,
			"--log-level", "warn"}, o.daemonFlags()...)
	default:
		return nil, fmt.Errorf("unknown --daemon %q (want child or inproc)", t.mode)
	}
	if err := t.start(ctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start starts a self-started daemon and waits until it serves.
func (t *target) start(ctx context.Context) error {
	switch t.mode {
	case modeInproc:
		d, err := daemon.Start(t.inprocCfg)
		if err != nil {
			return err
		}
		t.inproc, t.pid = d, os.Getpid()
		if t.caasApps > 0 {
			if t.caasModel, err = seedCAAS(d.State(), t.caasApps); err != nil {
				return err
			}
		}
		if t.creds == nil { // kept across restarts: agents read it meanwhile
			c := d.Credentials()
			t.creds = &c
			t.setHTTP()
		}
		return nil
	default:
		cmd := exec.Command(t.cmdArgs[0], t.cmdArgs[1:]...)
		cmd.Stdout, cmd.Stderr = t.logw, t.logw
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start daemon: %w", err)
		}
		t.cmd, t.pid = cmd, cmd.Process.Pid
		exited := make(chan struct{})
		t.exited = exited
		go func() { t.waitErr = cmd.Wait(); close(exited) }()
		return t.waitReady(ctx, exited)
	}
}

// waitReady polls credentials.yaml and /health until the child serves.
func (t *target) waitReady(ctx context.Context, exited chan struct{}) error {
	deadline := time.After(2 * time.Minute)
	for {
		if t.creds == nil {
			if c, err := credentials.Read(filepath.Join(t.dataDir, credentials.File)); err == nil && c.CACert != "" {
				t.creds = c
				t.setHTTP()
			}
		}
		if t.creds != nil {
			if resp, err := t.httpc.Get("https://" + t.addr + "/health"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					if t.caasApps > 0 && t.caasModel == "" {
						return t.findCAASModel(ctx)
					}
					return nil
				}
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("daemon exited before serving: %v", t.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("daemon did not serve within 2 minutes")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// findCAASModel looks up the seeded CAAS model's UUID.
func (t *target) findCAASModel(ctx context.Context) error {
	c, err := t.dialAdmin(ctx, "")
	if err != nil {
		return err
	}
	defer c.Close()
	var res params.ListModelsResult
	if err := c.Call(ctx, "ModelAdmin", 1, "", "ListModels", nil, &res); err != nil {
		return err
	}
	for _, m := range res.Models {
		if m.Name == caasModelName {
			t.caasModel = m.UUID
			return nil
		}
	}
	return fmt.Errorf("the daemon has no model %q", caasModelName)
}

func (t *target) setHTTP() {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(t.creds.CACert))
	t.httpc = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName},
			DisableKeepAlives: true,
		},
	}
}

// clientConfig is the client config of a connection to model ("" for /api).
func (t *target) clientConfig(model string) client.Config {
	return client.Config{Addr: t.addr, ModelUUID: model, CACert: []byte(t.creds.CACert), DialTimeout: time.Minute}
}

// dialAdmin logs in as the admin user on model.
func (t *target) dialAdmin(ctx context.Context, model string) (*client.Conn, error) {
	c, err := client.Dial(ctx, t.clientConfig(model))
	if err != nil {
		return nil, err
	}
	if _, err := c.LoginUser(ctx, t.creds.AdminUser, t.creds.AdminPassword); err != nil {
		c.Close()
		return nil, fmt.Errorf("admin login: %w", err)
	}
	return c, nil
}

// dialController logs in as the controller agent on model; it retries
// while the login limiter says "try again".
func (t *target) dialController(ctx context.Context, model string) (*client.Conn, error) {
	for attempt := 0; ; attempt++ {
		c, err := client.Dial(ctx, t.clientConfig(model))
		if err != nil {
			return nil, err
		}
		a := t.creds.ControllerAgent
		_, err = c.LoginAgent(ctx, a.Tag, a.Password, a.Nonce)
		if err == nil {
			return c, nil
		}
		c.Close()
		if !client.IsCode(err, params.CodeTryAgain) {
			return nil, fmt.Errorf("controller agent login: %w", err)
		}
		if err := sleepCtx(ctx, backoff(attempt)); err != nil {
			return nil, err
		}
	}
}

// stop stops a self-started daemon (SIGTERM for a child: a graceful
// shutdown, as systemd's restart) and waits for it.
func (t *target) stop() error {
	switch {
	case t.inproc != nil:
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := t.inproc.Shutdown(ctx)
		t.inproc = nil
		return err
	case t.cmd != nil:
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.exited:
		case <-time.After(time.Minute):
			_ = t.cmd.Process.Kill()
			<-t.exited
		}
		t.cmd = nil
		return t.waitErr
	}
	return nil
}

// restart stops the daemon and starts it again on the same data dir and
// address. It returns when the new daemon serves.
func (t *target) restart(ctx context.Context) error {
	if t.mode == modeExternal {
		return errors.New("cannot restart a daemon given by --credentials; let the tool start one")
	}
	t0 := time.Now()
	if err := t.stop(); err != nil {
		fmt.Fprintf(t.logw, "provisionbench: daemon stop: %v\n", err)
	}
	t.lastStop = time.Since(t0)
	return t.start(ctx)
}

func (t *target) close() {
	_ = t.stop()
	if t.ownsDir {
		os.RemoveAll(t.dataDir)
	}
}

// rss returns the daemon's resident memory in bytes: from
// /proc/<pid>/status when the pid is known, else from the daemon's own
// /metrics (process_resident_memory_bytes).
func (t *target) rss() (int64, error) {
	if t.pid != 0 {
		return procRSS(t.pid)
	}
	v, err := t.scrape("process_resident_memory_bytes")
	return int64(v), err
}

// settle asks a child daemon to collect garbage and return freed memory
// to the OS (SIGUSR1), so RSS readings hold live memory only.
func (t *target) settle() {
	if t.cmd != nil && t.mode == modeChild {
		_ = t.cmd.Process.Signal(syscall.SIGUSR1)
	}
	if t.inproc != nil {
		runtime.GC()
		debug.FreeOSMemory()
	}
	time.Sleep(300 * time.Millisecond)
}

// scrape returns the sum of the samples of metric name in /metrics.
func (t *target) scrape(name string) (float64, error) {
	resp, err := t.httpc.Get("https://" + t.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return scrapeMetric(resp.Body, name)
}

// scrapeHist reads histogram metric name (see scrapeHistogram) from
// /metrics.
func (t *target) scrapeHist(name string, want ...string) (histogram, error) {
	resp, err := t.httpc.Get("https://" + t.addr + "/metrics")
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	return scrapeHistogram(resp.Body, name, want...)
}

func scrapeMetric(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("metric %s not found", name)
	}
	return sum, sc.Err()
}

func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// benchApp is the name of seeded application i (Juju's application names
// need a letter in each hyphenated part).
func benchApp(i int) string { return "bench-w" + strconv.Itoa(i) }

// seedCAAS makes the CAAS model and its applications benchApp(0) ... benchApp(n-1)
// (those missing), for UpdateApplicationsUnits writers.
func seedCAAS(st *state.State, n int) (string, error) {
	m, err := st.ModelByName(caasModelName)
	if err != nil {
		m, err = st.AddModel(caasModelName, state.ModelTypeCAAS,
			map[string]any{"agent-version": daemon.ServerVersion, "workload-storage": "kubernetes"})
		if err != nil {
			return "", fmt.Errorf("seed CAAS model: %w", err)
		}
	}
	for i := range n {
		name := benchApp(i)
		if _, err := st.Application(m.UUID, name); err == nil {
			continue
		}
		_, err := st.AddCAASApplication(m.UUID, state.CAASApplicationParams{
			Name:  name,
			Charm: state.Charm{URL: "ch:bench-1", Revision: 1, Meta: &charm.Meta{Name: "bench"}},
			Scale: 1,
		})
		if err != nil {
			return "", fmt.Errorf("seed application %s: %w", name, err)
		}
	}
	return m.UUID, nil
}

// writeHeapProfile writes the heap profile (in use after the GC that
// settle asked for) to path.
func writeHeapProfile(path string, stderr io.Writer) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "provisionbench daemon: heap profile:", err)
	}
}

// childDaemon is the hidden command that serves the daemon in a child
// process: daemon.Start with the defaults (login rate limiting on), the
// CAAS seed, SIGTERM for a graceful shutdown, SIGUSR1 to collect garbage.
func childDaemon(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(childDaemonCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "")
	addr := fs.String("addr", "", "")
	apps := fs.Int("caas-apps", 0, "")
	cpuProfile := fs.String("cpuprofile", "", "")
	memProfile := fs.String("memprofile", "", "")
	cfg := daemon.Default("")
	fs.IntVar(&cfg.LoginRateMax, "login-rate-max", cfg.LoginRateMax, "")
	fs.DurationVar(&cfg.LoginRateRefill, "login-rate-refill", cfg.LoginRateRefill, "")
	fs.IntVar(&cfg.LoginConcurrent, "login-concurrent", cfg.LoginConcurrent, "")
	fs.IntVar(&cfg.MaxWatchers, "max-watchers", cfg.MaxWatchers, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.DataDir, cfg.Addr = *dataDir, *addr
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "provisionbench daemon:", err)
			return 1
		}
		defer f.Close()
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "provisionbench daemon:", err)
		return 1
	}
	if *apps > 0 {
		if _, err := seedCAAS(d.State(), *apps); err != nil {
			fmt.Fprintln(stderr, "provisionbench daemon:", err)
			return 1
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	for sig := range sigs {
		if sig == syscall.SIGUSR1 {
			runtime.GC()
			debug.FreeOSMemory()
			if *memProfile != "" {
				writeHeapProfile(*memProfile, stderr)
			}
			continue
		}
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		fmt.Fprintln(stderr, "provisionbench daemon: shutdown:", err)
		return 1
	}
	return 0
}
