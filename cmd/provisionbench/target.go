package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// How the daemon under test runs.
const (
	modeChild    = "child"    // this binary re-executed as a daemon (default)
	modeInproc   = "inproc"   // daemon.Start in this process
	modeBin      = "bin"      // --daemon-bin: a provisiond binary, "serve"
	modeExternal = "external" // --credentials: a daemon someone else runs
)

// target is the daemon under test.
type target struct {
	mode     string
	addr     string
	dataDir  string
	ownsDir  bool
	creds    *credentials.Credentials
	pid      int           // of the daemon process, when known
	lastStop time.Duration // how long the storm's restart took to stop the daemon
	drain    time.Duration // a self-started daemon's stop drains its connections over this long first (--drain)

	caasApps   int // seeded applications (self-started daemons only)
	caasModel  string
	inproc     *daemon.Daemon
	inprocCfg  daemon.Config
	cmd        *exec.Cmd
	cmdArgs    []string
	cpuProfile string
	// settledFile is where a child daemon says it has settled (settle).
	settledFile string
	exited      chan struct{} // closed when the child has exited
	waitErr     error         // its exit status, once exited is closed
	httpc       *http.Client
	logw        io.Writer
	etcd        *etcdTarget // nil: bbolt
	// ends is the connections it ended over the current run (connends.go).
	ends endsTrack
}

// targetSpec says how to start one self-started daemon.
type targetSpec struct {
	index      int    // its place among --daemons (0: the first, which seeds)
	dataDir    string // "": a new temporary dir
	caasApps   int
	cpuProfile string
	memProfile string
	// windowProfile is where a child daemon writes the CPU profile of
	// each measuring window (windowProfile.1, .2, ...).
	windowProfile string
	etcd          *etcdTarget // nil: bbolt
}

// etcdTarget is the etcd a daemon runs on.
type etcdTarget struct {
	endpoints []string
	prefix    string
	// maxTxnOps and maxRequestBytes are the cluster's limits (0: etcd's
	// defaults, which the daemon assumes too).
	maxTxnOps, maxRequestBytes int
	// pid is the tool's etcd member's process when it is a child of
	// this one; 0 otherwise (given endpoints, or in this process).
	pid int
	// The given cluster's security (--etcd-ca-file and the others); tls
	// is made from the files, for the tool's own clients.
	etcdSecurity
	tls *tls.Config
}

// etcdSecurity is a given etcd cluster's TLS files (https, client
// certificates) and auth user.
type etcdSecurity struct {
	caFile, certFile, keyFile string
	username, password        string
}

// secured reports whether any of it is set.
func (s etcdSecurity) secured() bool {
	return s.caFile != "" || s.certFile != "" || s.keyFile != "" || s.username != ""
}

// mainSpec is the spec of the one daemon of a run without --daemons.
func (o *options) mainSpec() targetSpec {
	return targetSpec{dataDir: o.dataDir, caasApps: o.caasApps, cpuProfile: o.cpuProfile, memProfile: o.memProfile,
		windowProfile: o.windowProf}
}

// startTarget starts (or, with --credentials, finds) the daemon.
func startTarget(ctx context.Context, o *options, spec targetSpec) (*target, error) {
	t := &target{caasApps: spec.caasApps, cpuProfile: spec.cpuProfile, logw: o.stderr, etcd: spec.etcd}
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
	t.drain = o.drain
	t.dataDir = spec.dataDir
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
		if et := spec.etcd; et != nil {
			cfg.Store = daemon.StoreEtcd
			cfg.Etcd = daemon.EtcdConfig{Endpoints: et.endpoints, Prefix: et.prefix, MaxTxnOps: et.maxTxnOps, MaxRequestBytes: et.maxRequestBytes,
				CAFile: et.caFile, CertFile: et.certFile, KeyFile: et.keyFile, Username: et.username, Password: et.password}
		}
		t.inprocCfg = cfg
	case modeChild:
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		t.settledFile = t.dataDir + ".settled"
		t.cmdArgs = append([]string{self, childDaemonCmd, "--data-dir", t.dataDir, "--addr", t.addr,
			"--caas-apps", strconv.Itoa(t.caasApps), "--cpuprofile", spec.cpuProfile, "--memprofile", spec.memProfile,
			"--window-cpuprofile", spec.windowProfile, "--settled", t.settledFile}, o.daemonFlags()...)
		t.cmdArgs = append(t.cmdArgs, spec.etcd.flags()...)
	case modeBin:
		t.caasApps = 0 // the API cannot deploy applications yet
		t.cmdArgs = append([]string{o.daemonBin, "serve", "--data-dir", t.dataDir, "--addr", t.addr,
			"--log-level", "warn"}, o.daemonFlags()...)
		t.cmdArgs = append(t.cmdArgs, spec.etcd.flags()...)
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
func (t *target) start(ctx context.Context) error { return t.startWaiting(ctx, true) }

// startWaiting starts a self-started daemon; with wait, it returns once
// the daemon serves (its /health says ok), else once a child process has
// started (the storm: its agents and its health watch tell when it
// serves; the tool's own poll of /health would wait behind the agents).
func (t *target) startWaiting(ctx context.Context, wait bool) error {
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
		cmd.Env = t.etcd.env()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start daemon: %w", err)
		}
		t.cmd, t.pid = cmd, cmd.Process.Pid
		exited := make(chan struct{})
		t.exited = exited
		go func() { t.waitErr = cmd.Wait(); close(exited) }()
		if !wait {
			return nil
		}
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
		_ = t.inproc.Drain(context.Background(), t.drain) // 0: none
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := t.inproc.Shutdown(ctx)
		t.inproc = nil
		return err
	case t.cmd != nil:
		_ = t.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-t.exited:
		case <-time.After(time.Minute + t.drain):
			_ = t.cmd.Process.Kill()
			<-t.exited
		}
		t.cmd = nil
		return t.waitErr
	}
	return nil
}

// kill kills a child daemon with SIGKILL, as a crash of its machine
// would, and waits for it to be gone.
func (t *target) kill() error {
	if t.cmd == nil {
		return errors.New("only a daemon in a child process can be killed")
	}
	if err := t.cmd.Process.Kill(); err != nil {
		return err
	}
	<-t.exited
	t.cmd = nil
	return nil
}

func (t *target) close() {
	_ = t.stop()
	if t.ownsDir {
		os.RemoveAll(t.dataDir)
	}
	if t.settledFile != "" {
		os.Remove(t.settledFile)
	}
}
