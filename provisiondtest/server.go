package provisiondtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/testkit/hook"
	"github.com/provisiond/provisiond/provisiondtest/internal/etcdhook"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/watcher"
)

// Timeouts of the Server's own waits and calls.
const (
	// CallTimeout bounds each call a helper makes (login, Provisioner and
	// ModelAdmin calls) and WaitRevision.
	CallTimeout = 30 * time.Second
	// ShutdownTimeout bounds Close.
	ShutdownTimeout = 30 * time.Second
	// maxLog is how much of the daemon's log a Server keeps (the end).
	maxLog = 4 << 20
)

// Store names the state engine of a Server.
type Store string

// The state engines.
const (
	// StoreBolt is the embedded bbolt file in the data dir: the default.
	StoreBolt Store = "bolt"
	// StoreEtcd is etcd: a one-member embedded etcd on loopback the Server
	// starts in its temp dir and stops when it closes, or the cluster
	// WithEtcd names (Join: the one another Server uses).
	StoreEtcd Store = "etcd"
)

// Limits are the daemon's limits (docs/operator-guide.md, "Flags, environment and config file"). A zero
// field keeps the daemon's default.
type Limits struct {
	ReadLimit       int64         // largest message in bytes
	MaxRequests     int           // concurrent requests per connection
	MaxConns        int           // open API connections (default: no limit)
	MaxWatchers     int           // watchers per connection
	WriteTimeout    time.Duration // a client that stops reading is dropped after it
	PingTimeout     time.Duration // an agent connection without Pinger.Ping is closed after it
	LoginTimeout    time.Duration // a connection not logged in is closed after it
	LoginRateMax    int           // agent login token bucket size
	LoginRateRefill time.Duration // time to refill one agent login token
	LoginConcurrent int           // agent logins in progress at once

	PreLoginReadLimit int64         // largest message before login
	MaxBulkItems      int           // list items in one call's params (and in a connection's running calls)
	MaxReplySize      int64         // largest reply
	MaxUnsent         int64         // reply bytes a connection may have queued unsent
	MaxHeaderBytes    int           // HTTP request header bytes
	IdleTimeout       time.Duration // HTTP keep-alive idle timeout

	MaxConnsPerEntity    int // open connections of one user or agent
	MaxWatchersPerEntity int // watchers of one user or agent
	MaxPendingConns      int // connections not yet logged in
	MaxPendingPerAddress int // connections not yet logged in from one client address

	LoginFailures   int           // failed logins from one client let through before its logins back off
	LoginBackoffMax time.Duration // the longest such backoff

	MaxAgentBinarySize int64 // largest agent binaries upload
}

// Option configures a Server.
type Option func(*options)

type options struct {
	dataDir  string
	store    Store
	limits   Limits
	clock    watcher.Clock
	logLevel slog.Level
	logTo    io.Writer
	daemon   []func(*daemon.Config)
	agent    bool

	etcdEndpoints []string // WithEtcd; none: an embedded etcd of the Server's own
	etcdPrefix    string

	etcdMaxTxnOps, etcdMaxRequestBytes int // Join's, or the Server's own etcd's
}

// WithDataDir runs the daemon on dir instead of a fresh temp dir, to start
// a second Server on the data of a first one that was closed (a restart).
// The Server does not remove dir.
func WithDataDir(dir string) Option { return func(o *options) { o.dataDir = dir } }

// WithStore chooses the state engine (default StoreBolt). StoreEtcd alone
// starts an embedded etcd for this Server; the test must link one in with
//
//	import _ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd"
//
// (without it, New says so), or name an etcd of its own with WithEtcd.
func WithStore(s Store) Option { return func(o *options) { o.store = s } }

// WithEtcd runs the daemon on the etcd cluster at endpoints, under prefix
// ("" for a prefix of the Server's own): several Servers given the same
// endpoints and prefix are several daemons of one controller. It implies
// WithStore(StoreEtcd). The endpoints are those of an etcd (3.5 or later)
// the test runs itself, e.g. with go.etcd.io/etcd/server/v3/embed or an
// etcd process, whose --max-txn-ops and --max-request-bytes are at least
// etcd's defaults; for the kit's own embedded etcd, start the first Server
// with WithStore(StoreEtcd) and the others with Join(first), or read its
// endpoints from Server.Etcd.
func WithEtcd(endpoints []string, prefix string) Option {
	return func(o *options) {
		o.store = StoreEtcd
		o.etcdEndpoints = endpoints
		o.etcdPrefix = prefix
	}
}

// Join runs the daemon as another daemon of s's controller: on the etcd
// cluster and prefix s uses (and within its limits). s must run on etcd.
func Join(s *Server) Option {
	endpoints, prefix := s.Etcd()
	join := WithEtcd(endpoints, prefix)
	return func(o *options) {
		join(o)
		o.etcdMaxTxnOps, o.etcdMaxRequestBytes = s.etcdMaxTxnOps, s.etcdMaxRequestBytes
	}
}

// WithLimits sets the daemon's limits; zero fields keep the defaults.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = l } }

// WithClock gives the daemon the clock of its timer watchers (machine
// error retry, start-time batching), e.g. watchertest.NewFakeClock(t0).
// The default is the wall clock.
func WithClock(c watcher.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogLevel sets the level of the daemon's log (default slog.LevelInfo).
func WithLogLevel(l slog.Level) Option { return func(o *options) { o.logLevel = l } }

// WithLogOutput copies the daemon's log to w as it is written (text
// format), e.g. os.Stderr while debugging a test. The Server keeps its own
// copy either way.
func WithLogOutput(w io.Writer) Option { return func(o *options) { o.logTo = w } }

// WithAgent runs provisiond's reference agent (what `provisionagent` and
// `provisiond serve --agent sim` run) beside the daemon, on a simulated
// cloud: as the controller agent it provisions every model's new machines
// (an instance id, hardware, addresses; the machine's agent logs in and
// reports it started, and provisions its containers) and runs every
// Kubernetes model's pods, and it tears down what is removed, so that a
// test of tooling sees a controller at work. WaitStatus waits for what it
// does. The agent stops before the daemon when the Server closes; its log
// is in the daemon's (component=agent).
//
// Machines are the agent's to provision: with WithAgent, MachineAgent and
// ProvisionMachine are for containers of machines the kit provisioned,
// not for the machines the agent starts. Of several daemons of one
// controller (Join), give WithAgent to one: it works for them all.
func WithAgent() Option { return func(o *options) { o.agent = true } }

// The repository's own tests reach the daemon through internal/testkit,
// which these hooks serve; provisiondtest's exported API names no type of
// an internal package.
func init() {
	hook.WithDaemonConfig = func(f func(*daemon.Config)) any {
		return Option(func(o *options) { o.daemon = append(o.daemon, f) })
	}
	hook.Daemon = func(s any) *daemon.Daemon { return s.(*Server).d }
}

// Server is a running daemon; see the package documentation.
type Server struct {
	d         *daemon.Daemon
	dataDir   string
	stopAgent func()            // WithAgent's; nil otherwise
	etcd      *etcdhook.Cluster // the Server's own embedded etcd; nil otherwise

	etcdEndpoints []string
	etcdPrefix    string
	// etcd's limits for the daemon: those of the Server's own etcd (or of
	// the Server it joined); zero (etcd's defaults) for WithEtcd's
	etcdMaxTxnOps, etcdMaxRequestBytes int
	tempDir                            string // New's temp dir (the data dir, or etcd's and the daemon's): Close removes it
	log                                *logBuffer

	provMu sync.Mutex // serialises ProvisionMachine

	mu     sync.Mutex
	conns  map[connKey]*client.Conn // the Server's own connections
	agents map[agentKey]AgentLogin  // machines this Server provisioned
	closed bool

	closeOnce sync.Once
	closeErr  error
}

// Start runs a daemon for the test t and stops it at t's cleanup. It fails
// t, with the daemon's log, when the daemon cannot start.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir is 0755; the daemon tightens its data dir to 0700 with a
	// warning about what others could have read. A test's dir is made
	// 0700 before anything is written in it: no warning.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := start(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("provisiondtest: stop: %v", err)
		}
		if t.Failed() {
			t.Logf("provisiondtest: the daemon's log (%s):\n%s", s.Addr(), s.Log())
		}
	})
	return s
}

// New runs a daemon on a fresh temp dir, which Close removes. The caller
// must Close the Server. The error of a failed start carries the daemon's
// log.
func New(opts ...Option) (*Server, error) {
	dir, err := os.MkdirTemp("", "provisiondtest-")
	if err != nil {
		return nil, err
	}
	s, err := start(dir, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.tempDir = dir
	return s, nil
}

func start(tempDir string, opts []Option) (*Server, error) {
	o := options{store: StoreBolt, logLevel: slog.LevelInfo, dataDir: tempDir}
	for _, opt := range opts {
		opt(&o)
	}
	var own *etcdhook.Cluster
	switch o.store {
	case StoreBolt:
	case StoreEtcd:
		if len(o.etcdEndpoints) == 0 {
			if etcdhook.Start == nil {
				return nil, errors.New(`provisiondtest: StoreEtcd without WithEtcd needs an embedded etcd: import _ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd" in the test`)
			}
			c, err := etcdhook.Start(filepath.Join(tempDir, "etcd"))
			if err != nil {
				return nil, fmt.Errorf("provisiondtest: starting an embedded etcd: %w", err)
			}
			own = c
			o.etcdEndpoints = c.Endpoints
			o.etcdMaxTxnOps, o.etcdMaxRequestBytes = c.MaxTxnOps, c.MaxRequestBytes
		}
		if o.etcdPrefix == "" {
			o.etcdPrefix = "/provisiondtest-" + randomSuffix() + "/"
		}
		if o.dataDir == tempDir {
			o.dataDir = filepath.Join(tempDir, "daemon")
		}
	default:
		return nil, fmt.Errorf("provisiondtest: unknown store %q (want %q or %q)", o.store, StoreBolt, StoreEtcd)
	}
	buf := &logBuffer{}
	var w io.Writer = buf
	if o.logTo != nil {
		w = io.MultiWriter(buf, o.logTo)
	}
	cfg := daemon.Default(o.dataDir)
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: o.logLevel}))
	cfg.Clock = o.clock
	applyLimits(&cfg, o.limits)
	if o.store == StoreEtcd {
		cfg.Store = daemon.StoreEtcd
		cfg.Etcd = daemon.EtcdConfig{Endpoints: o.etcdEndpoints, Prefix: o.etcdPrefix,
			MaxTxnOps: o.etcdMaxTxnOps, MaxRequestBytes: o.etcdMaxRequestBytes}
	}
	for _, f := range o.daemon {
		f(&cfg)
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		if own != nil {
			own.Close()
		}
		return nil, fmt.Errorf("provisiondtest: the daemon did not start: %w\nthe daemon's log:\n%s", err, buf.String())
	}
	s := &Server{d: d, dataDir: o.dataDir, log: buf, etcd: own,
		etcdEndpoints: o.etcdEndpoints, etcdPrefix: o.etcdPrefix,
		etcdMaxTxnOps: o.etcdMaxTxnOps, etcdMaxRequestBytes: o.etcdMaxRequestBytes,
		conns: make(map[connKey]*client.Conn), agents: make(map[agentKey]AgentLogin)}
	if o.agent {
		if s.stopAgent, err = startAgent(s, cfg.Logger.With("component", "agent")); err != nil {
			err = errors.Join(err, s.Close())
			return nil, fmt.Errorf("provisiondtest: the agent did not start: %w", err)
		}
	}
	return s, nil
}

func applyLimits(cfg *daemon.Config, l Limits) {
	set := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	setD := func(dst *time.Duration, v time.Duration) {
		if v != 0 {
			*dst = v
		}
	}
	set(&cfg.MaxRequests, l.MaxRequests)
	set(&cfg.MaxConns, l.MaxConns)
	set(&cfg.MaxWatchers, l.MaxWatchers)
	set(&cfg.LoginRateMax, l.LoginRateMax)
	set(&cfg.LoginConcurrent, l.LoginConcurrent)
	setD(&cfg.WriteTimeout, l.WriteTimeout)
	setD(&cfg.PingTimeout, l.PingTimeout)
	setD(&cfg.LoginTimeout, l.LoginTimeout)
	setD(&cfg.LoginRateRefill, l.LoginRateRefill)
	set64 := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	set64(&cfg.ReadLimit, l.ReadLimit)
	set64(&cfg.PreLoginReadLimit, l.PreLoginReadLimit)
	set64(&cfg.MaxReplySize, l.MaxReplySize)
	set64(&cfg.MaxUnsent, l.MaxUnsent)
	set(&cfg.MaxBulkItems, l.MaxBulkItems)
	set(&cfg.MaxHeaderBytes, l.MaxHeaderBytes)
	setD(&cfg.IdleTimeout, l.IdleTimeout)
	set(&cfg.MaxConnsPerEntity, l.MaxConnsPerEntity)
	set(&cfg.MaxWatchersPerEntity, l.MaxWatchersPerEntity)
	set(&cfg.MaxPendingConns, l.MaxPendingConns)
	set(&cfg.MaxPendingPerAddress, l.MaxPendingPerAddress)
	set(&cfg.LoginFailures, l.LoginFailures)
	setD(&cfg.LoginBackoffMax, l.LoginBackoffMax)
	set64(&cfg.MaxAgentBinarySize, l.MaxAgentBinarySize)
}

// Close stops the agent (WithAgent), closes the Server's own connections,
// stops the daemon (every connection closes, then the state) and, for a
// Server made by New, removes its data dir. It is idempotent; Start's
// cleanup calls it.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.stopAgent != nil {
			s.stopAgent()
		}
		s.mu.Lock()
		s.closed = true
		conns := s.conns
		s.conns = nil
		s.mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		err := s.d.Shutdown(ctx)
		if s.etcd != nil {
			s.etcd.Close()
		}
		if s.tempDir != "" {
			err = errors.Join(err, os.RemoveAll(s.tempDir))
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Etcd returns the etcd endpoints and prefix of a Server on etcd (none on
// bbolt), for another Server to join (Join) or a test to reach etcd.
func (s *Server) Etcd() (endpoints []string, prefix string) {
	return slices.Clone(s.etcdEndpoints), s.etcdPrefix
}

// Addr is the daemon's API address, 127.0.0.1:PORT.
func (s *Server) Addr() string { return s.d.Addr() }

// DataDir is the daemon's data dir.
func (s *Server) DataDir() string { return s.dataDir }

// Credentials returns a copy of what the daemon wrote to credentials.yaml:
// its address, CA certificate, the admin user's and the controller
// agent's logins, the UUIDs of the controller and default models.
func (s *Server) Credentials() *credentials.Credentials {
	c := s.d.Credentials()
	c.APIAddresses = append([]string(nil), c.APIAddresses...)
	return &c
}

// CredentialsFile is the path of the daemon's credentials.yaml, for code
// under test that reads one (client.DialCredentialsFile, provisionctl
// --credentials).
func (s *Server) CredentialsFile() string { return filepath.Join(s.dataDir, credentials.File) }

// ControllerModel is the UUID of the controller model.
func (s *Server) ControllerModel() string { return s.d.Credentials().ControllerModelUUID }

// DefaultModel is the UUID of the "default" IAAS model.
func (s *Server) DefaultModel() string { return s.d.Credentials().DefaultModelUUID }

// Log returns the daemon's log so far (its last 4 MiB).
func (s *Server) Log() string { return s.log.String() }

// Revision returns the latest revision of the state the daemon has
// applied. Every acknowledged write has moved it.
func (s *Server) Revision() uint64 { return s.d.State().Revision() }

// WaitRevision waits until the daemon has applied revision rev of its
// state (a write that another daemon of the controller acknowledged), for
// at most CallTimeout, and fails t otherwise. With the bbolt store a
// daemon applies its own writes before acknowledging them, so a write
// made through this Server is applied when its call returns.
func (s *Server) WaitRevision(t testing.TB, rev uint64) {
	t.Helper()
	deadline := time.Now().Add(CallTimeout)
	// Polled: the state offers no notification of applied revisions; the
	// wait is bounded by CallTimeout, not a guess at how long it takes.
	for backoff := 100 * time.Microsecond; s.Revision() < rev; backoff = min(2*backoff, 10*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("provisiondtest: revision %d not applied after %v (at %d)", rev, CallTimeout, s.Revision())
		}
		time.Sleep(backoff)
	}
}

// logBuffer keeps the end of the daemon's log; it is safe for concurrent
// use (slog's handler serialises its own writes, but String runs beside
// them).
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) > maxLog {
		keep := b.buf.Bytes()[b.buf.Len()/2:]
		var fresh bytes.Buffer
		fresh.WriteString("[... earlier log dropped ...]\n")
		fresh.Write(keep)
		b.buf = fresh
	}
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// randomSuffix makes an etcd prefix of a Server's own.
func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
