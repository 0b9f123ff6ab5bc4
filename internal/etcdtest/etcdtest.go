// Package etcdtest runs a real etcd in this process (go.etcd.io/etcd/server/v3/embed)
// on loopback, with free ports and its data in a directory of the caller's:
// one member, or a cluster of several whose members a test can stop and
// start again (find the leader, kill it). It serves the tests of the etcd
// store and of the daemon in etcd mode, and provisionbench, which starts
// etcd itself when given no endpoints: Start is the plain API, New and
// NewCluster its testing.TB helpers, which clean up after the test.
//
// A fault a member of this process cannot suffer (SIGSTOP: a hung
// machine, its sockets open and nothing answered) needs members that are
// processes of their own: StartProcesses and NewProcesses run each member
// as a program that calls MemberMain (cmd/etcdcluster, or the test binary
// itself), with Pause, Resume and Stop of one member (process.go).
//
// # Limits
//
// A default etcd allows 128 operations (compares, and separately puts and
// deletes) per transaction and requests of 1.5 MiB. The members started
// here allow MaxTxnOps operations and MaxRequestBytes per request (or the
// Options'), enough for provisiond's largest transactions; a production
// etcd serving provisiond should run with the same settings:
//
//	etcd --max-txn-ops=1024 --max-request-bytes=8388608
//
// and the daemon be told the same limits (the store splits or refuses what
// would exceed them instead of sending it). It also needs compaction: every
// commit of provisiond writes a new version of its feed key, so without
// --auto-compaction-mode=periodic --auto-compaction-retention=1h (or a
// revision retention) etcd's history grows until its space quota raises
// the NOSPACE alarm and refuses writes. A daemon cut off for longer than
// the retention reloads and wakes its watchers when it is back. The
// members started here do not compact on their own (tests compact when
// they mean to).
//
// # Concurrency
//
// A Cluster is safe for concurrent use. Each running member owns etcd's
// goroutines; Stop and Close stop them and wait for them.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The limits the members started here allow (see the package documentation).
const (
	MaxTxnOps       = 1024
	MaxRequestBytes = 8 << 20
)

// Options configures Start. The zero value starts one member.
type Options struct {
	// Dir holds the members' data directories (one per member, made if
	// missing). Required.
	Dir string

	// Members is the number of members: 1 (the default) or more.
	Members int

	// MaxTxnOps and MaxRequestBytes default to the package's constants.
	MaxTxnOps       uint
	MaxRequestBytes uint

	// NoFsync skips fsync (etcd's --unsafe-no-fsync): for tests that do
	// not measure nor crash the machine. Benchmarks leave it false.
	NoFsync bool

	// QuotaBackendBytes is etcd's --quota-backend-bytes: the size of its
	// database past which it raises the NOSPACE alarm and refuses writes
	// (0: etcd's default, 2 GiB).
	QuotaBackendBytes int64

	// Logger receives etcd's logs; nil logs errors to standard error.
	Logger *zap.Logger

	// TLS, if set, makes the client URLs https with these files, and
	// requires client certificates signed by its CA (etcd's
	// --client-cert-auth). Peers talk plain http on loopback.
	TLS *TLSFiles
}

// Cluster is a running etcd cluster of one or more members.
type Cluster struct {
	opts    Options
	members []*Member
	mu      sync.Mutex // serialises Stop, Start and Close
}

// Member is one etcd member.
type Member struct {
	Name      string
	Dir       string
	ClientURL string
	PeerURL   string

	cfg   *embed.Config
	quiet atomic.Bool // set while stopping: etcd logs its own shutdown as errors
	mu    sync.Mutex
	etcd  *embed.Etcd // nil while stopped
	guard statusGuard
}

// Start starts a cluster and waits until every member is ready. Ports are
// picked free on 127.0.0.1; a start that loses a port to another process
// in the meantime is retried with new ones.
func Start(opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("etcdtest: Options.Dir is required")
	}
	if opts.Members <= 0 {
		opts.Members = 1
	}
	if opts.MaxTxnOps == 0 {
		opts.MaxTxnOps = MaxTxnOps
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = MaxRequestBytes
	}
	if opts.Logger == nil {
		opts.Logger = ErrorLogger(os.Stderr)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var c *Cluster
		c, err = start(opts, attempt)
		if err == nil {
			return c, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}

func start(opts Options, attempt int) (*Cluster, error) {
	c := &Cluster{opts: opts}
	specs, err := layout(opts, attempt)
	if err != nil {
		return nil, err
	}
	for _, spec := range specs {
		m := &Member{Name: spec.Name, Dir: spec.Dir, ClientURL: spec.ClientURL, PeerURL: spec.PeerURL}
		m.cfg = memberConfig(spec, opts.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
			return &quietCore{Core: c, quiet: &m.quiet}
		})))
		m.cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.guard.intercept)}
		c.members = append(c.members, m)
	}
	// Members of a cluster must start together: each waits for a quorum.
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.start()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// layout gives the members of a new cluster of opts their names, data
// dirs (under opts.Dir, new at each attempt) and free loopback ports.
func layout(opts Options, attempt int) ([]MemberSpec, error) {
	scheme := "http"
	if opts.TLS != nil {
		scheme = "https"
	}
	specs := make([]MemberSpec, opts.Members)
	var initial []string
	for i := range specs {
		ports, err := freePorts(2)
		if err != nil {
			return nil, err
		}
		specs[i] = MemberSpec{
			Name:      fmt.Sprintf("m%d", i),
			Dir:       filepath.Join(opts.Dir, fmt.Sprintf("m%d.%d", i, attempt)),
			ClientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
			Token:     filepath.Base(opts.Dir) + fmt.Sprint(attempt),
			MaxTxnOps: opts.MaxTxnOps, MaxRequestBytes: opts.MaxRequestBytes,
			NoFsync: opts.NoFsync, QuotaBackendBytes: opts.QuotaBackendBytes, TLS: opts.TLS,
		}
		initial = append(initial, specs[i].Name+"="+specs[i].PeerURL)
	}
	for i := range specs {
		specs[i].InitialCluster = strings.Join(initial, ",")
	}
	return specs, nil
}

// MemberSpec is one member of a cluster: where it listens and keeps its
// data, the cluster it belongs to and its settings. Start makes one per
// member; StartProcesses hands each to a process of its own (RunMember).
type MemberSpec struct {
	Name      string
	Dir       string
	ClientURL string
	PeerURL   string
	// InitialCluster is every member's name=peer URL, comma-separated;
	// Token the cluster's. Existing joins the cluster from the data dir
	// (a restart) instead of making it.
	InitialCluster string
	Token          string
	Existing       bool

	MaxTxnOps         uint
	MaxRequestBytes   uint
	NoFsync           bool
	QuotaBackendBytes int64
	TLS               *TLSFiles
}

// memberConfig is etcd's configuration of the member spec describes,
// logging to lg.
func memberConfig(spec MemberSpec, lg *zap.Logger) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = spec.Name
	cfg.Dir = spec.Dir
	cu, _ := url.Parse(spec.ClientURL)
	pu, _ := url.Parse(spec.PeerURL)
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = spec.InitialCluster
	cfg.InitialClusterToken = spec.Token
	cfg.ClusterState = embed.ClusterStateFlagNew
	if spec.Existing {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.MaxTxnOps = spec.MaxTxnOps
	cfg.MaxRequestBytes = spec.MaxRequestBytes
	cfg.UnsafeNoFsync = spec.NoFsync
	cfg.QuotaBackendBytes = spec.QuotaBackendBytes
	cfg.Metrics = "basic"
	// embed.NewConfig leaves the unary request warning threshold at 0
	// (etcd's own command line gives it 300 ms), so every request
	// took "too long": etcd formatted each one as text for a warning
	// the logger then dropped, 12% of its CPU under provisionbench's
	// grouped writes.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	// bcrypt's minimum cost: etcd hashes a password at every
	// authentication, and the default cost takes tens of
	// milliseconds of CPU on this 2-core box (more under -race).
	cfg.BcryptCost = 4
	if t := spec.TLS; t != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{
			CertFile: t.ServerCert, KeyFile: t.ServerKey,
			TrustedCAFile: t.CAFile, ClientCertAuth: true,
		}
	}
	// Faster elections than etcd's defaults (100 ms heartbeat, 1 s
	// election): a test that kills the leader waits less. Loopback
	// round trips are well under the heartbeat.
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg.With(zap.String("member", spec.Name)))
	return cfg
}

// readyTimeout bounds how long a member may take to be ready.
const readyTimeout = 60 * time.Second

func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd != nil {
		return nil
	}
	m.guard.start()
	e, err := startEmbed(m.cfg)
	if err != nil {
		return err
	}
	m.etcd = e
	return nil
}

// statusGuard keeps etcd's maintenance Status off a member being stopped:
// served once HardStop has closed the member's backend, and before Close
// stops its gRPC servers, Status dereferences a nil transaction and
// panics, taking the test's whole process with it (the stores' member
// watch asks every member for its status often). stop waits for the
// Status calls in progress (they read local state only) and refuses the
// later ones.
type statusGuard struct {
	mu       sync.RWMutex
	stopping bool
}

func (g *statusGuard) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod != "/etcdserverpb.Maintenance/Status" {
		return handler(ctx, req)
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.stopping {
		return nil, status.Error(codes.Unavailable, "etcdtest: the member is stopping")
	}
	return handler(ctx, req)
}

func (g *statusGuard) start() { g.set(false) }
func (g *statusGuard) stop()  { g.set(true) }

func (g *statusGuard) set(stopping bool) {
	g.mu.Lock()
	g.stopping = stopping
	g.mu.Unlock()
}

// startEmbed starts a member with etcd's server and waits until it is
// ready.
func startEmbed(cfg *embed.Config) (*embed.Etcd, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: start %s: %w", cfg.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdtest: start %s: %w", cfg.Name, err)
	case <-time.After(readyTimeout):
		e.Server.HardStop()
		e.Close()
		return nil, fmt.Errorf("etcdtest: start %s: not ready after %s", cfg.Name, readyTimeout)
	}
}

// stop stops the member without handing its leadership over first (as a
// crash would leave it), and waits for its goroutines.
func (m *Member) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd == nil {
		return
	}
	m.quiet.Store(true)
	defer m.quiet.Store(false)
	m.guard.stop()
	m.etcd.Server.HardStop()
	m.etcd.Close()
	m.etcd = nil
	// The next start joins the existing cluster from its data dir.
	m.cfg.ClusterState = embed.ClusterStateFlagExisting
}

// Running reports whether the member is running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd != nil
}

// Endpoints returns every member's client URL (stopped ones too: a client
// given them all fails over as members come and go).
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Members returns the members, in the order of their names (m0, m1, ...).
func (c *Cluster) Members() []*Member { return c.members }

// MaxTxnOps and MaxRequestBytes return the limits the members run with.
func (c *Cluster) MaxTxnOps() int       { return int(c.opts.MaxTxnOps) }
func (c *Cluster) MaxRequestBytes() int { return int(c.opts.MaxRequestBytes) }

// Stop stops member i as a crash would (no leadership hand-over) and
// waits for it. Stopping a stopped member does nothing.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[i].stop()
}

// Running reports whether member i runs.
func (c *Cluster) Running(i int) bool { return c.members[i].Running() }

// Restart starts a stopped member again, on its ports and data dir, and
// waits until it is ready (which, in a cluster, needs a quorum).
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].start()
}

// Leader returns the index of the member that leads, as a running member
// sees it, waiting up to ctx for one to be elected.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for {
		for _, m := range c.members {
			m.mu.Lock()
			e := m.etcd
			var lead, self uint64
			if e != nil {
				lead, self = e.Server.Lead(), uint64(e.Server.MemberID())
			}
			m.mu.Unlock()
			if e == nil || lead == 0 || lead != self {
				continue
			}
			for i := range c.members {
				if c.members[i] == m {
					return i, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdtest: no leader: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Close stops every member and waits for them. It is idempotent. The data
// directories are left for the caller (a test's TempDir removes them).
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Add(1)
		go func() { defer wg.Done(); m.stop() }()
	}
	wg.Wait()
}

// New starts a one-member etcd in tb.TempDir() without fsync and stops it
// when the test ends. Its logs (errors only) go to the test's log.
func New(tb testing.TB) *Cluster { return NewCluster(tb, 1) }

// NewCluster is New with n members.
func NewCluster(tb testing.TB, n int) *Cluster { return NewWith(tb, Options{Members: n}) }

// NewWith is New with opts; its Dir, NoFsync and Logger are New's.
func NewWith(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	opts.Dir, opts.NoFsync, opts.Logger = tb.TempDir(), true, TestLogger(tb)
	c, err := Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// NewTLS is New with TLS: https client URLs requiring client certificates
// signed by the CA of the files it returns (written in tb.TempDir()).
func NewTLS(tb testing.TB) (*Cluster, *TLSFiles) {
	tb.Helper()
	files, err := WriteTLS(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	return NewWith(tb, Options{TLS: files}), files
}

// TestLogger returns a zap logger that writes errors to tb's log while the
// test runs, and drops what etcd's goroutines log after it ended.
func TestLogger(tb testing.TB) *zap.Logger {
	w := &tbWriter{tb: tb}
	tb.Cleanup(w.stop) // registered first, so it runs after the cluster's Close
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), zap.ErrorLevel)
	return zap.New(core)
}

type tbWriter struct {
	mu   sync.Mutex
	tb   testing.TB
	done bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.tb.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tbWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// quietCore drops a member's logs while it stops.
type quietCore struct {
	zapcore.Core
	quiet *atomic.Bool
}

func (c *quietCore) With(f []zapcore.Field) zapcore.Core {
	return &quietCore{Core: c.Core.With(f), quiet: c.quiet}
}

func (c *quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.quiet.Load() {
		return ce
	}
	return c.Core.Check(e, ce)
}

// ErrorLogger is a zap logger that writes etcd's errors to w.
func ErrorLogger(w io.Writer) *zap.Logger {
	enc := zap.NewProductionEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), zap.ErrorLevel)
	return zap.New(core)
}

// freePorts returns n TCP ports on 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
