package daemon

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/facades/admin"
	"github.com/provisiond/provisiond/facades/caasunitprovisioner"
	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/facades/machineundertaker"
	"github.com/provisiond/provisiond/facades/modeladmin"
	"github.com/provisiond/provisiond/facades/pinger"
	"github.com/provisiond/provisiond/facades/provisioner"
	"github.com/provisiond/provisiond/facades/watchers"
	"github.com/provisiond/provisiond/internal/agentbinaries"
	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/connlimit"
	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/dashboard"
	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/internal/singular"
	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/watcher"
)

// ServerVersion is the Juju API level provisiond serves.
const ServerVersion = "3.3.0"

// DBFile is the name of the bbolt file in the data dir.
const DBFile = controllerstore.DBFile

// Config is everything Start needs. Zero values take the defaults below.
type Config struct {
	DataDir string
	Addr    string
	// Store is the engine the controller lives in: StoreBolt (the
	// default: provisiond.db in DataDir) or StoreEtcd (Etcd: a cluster
	// several daemons share; store.go, docs/scale-out.md).
	Store string
	Etcd  EtcdConfig
	// CertFile, KeyFile and CAFile are operator-supplied TLS material; when
	// empty the daemon makes and keeps its own CA and certificate.
	CertFile, KeyFile, CAFile string
	Logger                    *slog.Logger

	ReadLimit    int64
	MaxRequests  int
	MaxConns     int
	MaxWatchers  int
	WriteTimeout time.Duration
	PingTimeout  time.Duration
	LoginTimeout time.Duration

	// Limits on what a client may make the daemon hold (limits.go,
	// internal/connlimit, rpc/limits.go; docs/operator-guide.md's flags table has each default).
	PreLoginReadLimit int64
	MaxBulkItems      int
	MaxReplySize      int64
	MaxUnsent         int64
	MaxHeaderBytes    int
	IdleTimeout       time.Duration

	MaxConnsPerEntity    int
	MaxWatchersPerEntity int

	// Rebalance, on a store several daemons share, has a daemon holding
	// more than its share of the controller's connections refuse new ones
	// and hand a few of its agents at a time to a daemon with room
	// (balance.go). Live: Reload.
	Rebalance bool

	// MaxPendingConns bounds the connections that have not logged in (0:
	// half of MaxConns), MaxPendingPerAddress those of one client (0: a
	// sixteenth of MaxConns, at least 8, at most a quarter of
	// MaxPendingConns); internal/connlimit.
	MaxPendingConns      int
	MaxPendingPerAddress int

	// LoginFailures failed logins of a user or an agent from one client
	// are let through before its logins from there back off, up to
	// LoginBackoffMax (facades/admin/throttle.go).
	LoginFailures   int
	LoginBackoffMax time.Duration

	// MetricsAuth says who may read /metrics: MetricsAuthLocal (the
	// default), MetricsAuthAlways or MetricsAuthNone. MetricsTokenFile
	// holds a bearer token that also opens it.
	MetricsAuth      string
	MetricsTokenFile string

	// Reinitialise lets Start make a new controller in a data dir that
	// holds an earlier one's files but no initialised database (else
	// ErrEarlierController); the earlier credentials.yaml is kept aside.
	Reinitialise bool

	// HealthTimeout is how long /health waits for the store's writer
	// before it reports the daemon unhealthy.
	HealthTimeout time.Duration

	LoginRateMax    int
	LoginRateRefill time.Duration
	LoginConcurrent int

	// HandshakeSlots bounds the TLS handshakes of the API listener doing
	// their work at once (0: two per GOMAXPROCS); HandshakeWait is how
	// long one may wait for a slot (0: connlimit.DefaultHandshakeWait).
	HandshakeSlots int
	HandshakeWait  time.Duration

	// ShedLatency sheds new connections while the 99th percentile of the
	// daemon's goroutines' waits to run is at least this (0, the default:
	// never; internal/connlimit, overload.go).
	ShedLatency time.Duration

	// Clock drives timer watchers; nil is the wall clock (tests inject a
	// fake one).
	Clock watcher.Clock

	// MaxAgentBinarySize bounds an agent binaries upload in bytes (0:
	// agentbinaries.DefaultMaxSize).
	MaxAgentBinarySize int64

	// MetricsAddr, when set, is a loopback address where /metrics is also
	// served over plain HTTP (service.go). AuditLog, when set, is a file
	// the audit trail is appended to as JSON lines (audit.go).
	MetricsAddr string
	AuditLog    string

	// HistoryRetention is how much of the history of commits is kept
	// (history.go; zero: store.DefaultRetention). A reload changes it.
	HistoryRetention store.Retention
}

// Defaults.
const (
	DefaultAddr            = "127.0.0.1:17070"
	DefaultPingTimeout     = 3 * time.Minute
	DefaultLoginTimeout    = time.Minute
	DefaultMaxWatchers     = 1000
	DefaultLoginRateMax    = 0 // no rate limit: limits.go, loginWait
	DefaultLoginRateRefill = 2 * time.Millisecond
	DefaultLoginConcurrent = 64
)

// Default returns a Config with every default filled in, on dataDir.
func Default(dataDir string) Config {
	return Config{
		DataDir:         dataDir,
		Addr:            DefaultAddr,
		ReadLimit:       rpc.DefaultReadLimit,
		MaxRequests:     rpc.DefaultMaxRequests,
		MaxWatchers:     DefaultMaxWatchers,
		WriteTimeout:    rpc.DefaultWriteTimeout,
		PingTimeout:     DefaultPingTimeout,
		LoginTimeout:    DefaultLoginTimeout,
		LoginRateMax:    DefaultLoginRateMax,
		LoginRateRefill: DefaultLoginRateRefill,
		LoginConcurrent: DefaultLoginConcurrent,

		MaxConns:          connlimit.DefaultMaxConns(),
		PreLoginReadLimit: rpc.DefaultPreLoginReadLimit,
		MaxBulkItems:      rpc.DefaultMaxBulkItems,
		MaxReplySize:      rpc.DefaultMaxReplySize,
		MaxUnsent:         rpc.DefaultMaxUnsent,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		IdleTimeout:       DefaultIdleTimeout,

		MaxConnsPerEntity:    DefaultMaxConnsPerEntity,
		MaxWatchersPerEntity: DefaultMaxWatchersPerEntity,
		Rebalance:            true,
		LoginFailures:        admin.DefaultLoginFailures,
		LoginBackoffMax:      admin.DefaultLoginBackoffMax,
		MetricsAuth:          MetricsAuthLocal,
	}
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	switch {
	case c.DataDir == "":
		return errors.New("data dir is required")
	case c.Addr == "":
		return errors.New("listen address is required")
	case c.validateStore() != nil:
		return c.validateStore()
	case (c.CertFile == "") != (c.KeyFile == ""):
		return errors.New("--cert-file and --key-file go together")
	case c.MetricsAuth != "" && c.MetricsAuth != MetricsAuthLocal && c.MetricsAuth != MetricsAuthAlways && c.MetricsAuth != MetricsAuthNone:
		return fmt.Errorf("--metrics-auth %q: want %s, %s or %s", c.MetricsAuth, MetricsAuthLocal, MetricsAuthAlways, MetricsAuthNone)
	}
	for _, l := range []struct {
		flag string
		n    int64
	}{
		{"--read-limit", c.ReadLimit}, {"--max-requests", int64(c.MaxRequests)}, {"--max-connections", int64(c.MaxConns)},
		{"--max-watchers", int64(c.MaxWatchers)}, {"--login-rate-max", int64(c.LoginRateMax)},
		{"--login-concurrent", int64(c.LoginConcurrent)}, {"--prelogin-read-limit", c.PreLoginReadLimit},
		{"--max-bulk-items", int64(c.MaxBulkItems)}, {"--max-reply-size", c.MaxReplySize}, {"--max-unsent", c.MaxUnsent},
		{"--max-header-bytes", int64(c.MaxHeaderBytes)}, {"--max-agent-binary-size", c.MaxAgentBinarySize},
		{"--max-connections-per-entity", int64(c.MaxConnsPerEntity)}, {"--max-watchers-per-entity", int64(c.MaxWatchersPerEntity)},
		{"--login-failures", int64(c.LoginFailures)}, {"--max-pending-connections", int64(c.MaxPendingConns)},
		{"--max-pending-per-address", int64(c.MaxPendingPerAddress)},
	} {
		if l.n < 0 {
			return fmt.Errorf("%s %d: limits must not be negative", l.flag, l.n)
		}
	}
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{
		{"--write-timeout", c.WriteTimeout}, {"--ping-timeout", c.PingTimeout}, {"--login-timeout", c.LoginTimeout},
		{"--login-rate-refill", c.LoginRateRefill}, {"--idle-timeout", c.IdleTimeout}, {"--login-backoff-max", c.LoginBackoffMax},
		{"--shed-latency", c.ShedLatency},
	} {
		if d.d < 0 {
			return fmt.Errorf("%s %s: durations must not be negative", d.flag, d.d)
		}
	}
	return nil
}

// setDefaults fills in the zero limits that rpc does not default itself.
func (c *Config) setDefaults() {
	if c.MaxConns == 0 {
		c.MaxConns = connlimit.DefaultMaxConns()
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = rpc.DefaultWriteTimeout
	}
	if c.HealthTimeout == 0 {
		c.HealthTimeout = DefaultHealthTimeout
	}
}

// Daemon is a running provisiond.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	state    *state.State
	bolt     *boltstore.Store // the state's store on bbolt (nil on etcd)
	hub      *watcher.Hub
	rpc      *rpc.Server
	http     *http.Server
	ln       net.Listener
	tcp      *connlimit.Listener
	gate     *connlimit.HandshakeGate
	throttle *admin.Throttle
	// metricsToken opens /metrics as a bearer token; empty: none.
	metricsToken string
	health       healthProbe
	earlier      bool // the data dir held an earlier controller's files at start
	tls          *pki.Material
	credsMu      sync.Mutex // guards creds' api-addresses once serving (cluster.go)
	creds        Credentials
	// serverID names this daemon among the live API servers; hostPorts
	// are its addresses; unregister removes its record (cluster.go).
	serverID   string
	hostPorts  []params.HostPort
	unregister func()
	// lastServers is the last list of API servers read (apiHostPorts).
	lastServers atomic.Pointer[[][]params.HostPort]
	cluster     *cluster // the shared-store goroutines; nil on bbolt
	// balance is the balancing of agents between daemons (balance.go; nil
	// on bbolt); rebalance is --rebalance, draining set once Drain began.
	balance   *balancer
	rebalance atomic.Bool
	draining  atomic.Bool
	binaries  *agentbinaries.Server
	metrics   *metrics
	environ   *environ.Provider
	dash      *dashboard.Dashboard
	agents    prometheus.Gauge
	presence  *presence.Recorder   // who is connected (presence.go)
	entities  *facade.EntityLimits // connections and watchers per agent or user (limits.go)
	done      chan struct{}
	serveErr  error
	failure   *storeFailure // the store's failure (storefail.go)
	limiter   *admin.Limiter
	audit     *auditor
	svc       service
	singular  *singular.Runner // the controller's singular workers (singular.go)
	history   history          // the history's retention and figures (history.go)

	mu       sync.Mutex // guards stopping (and the expiry timer's re-arming)
	stopping bool
}

// Start opens (and on first start initialises) the data dir, listens on
// cfg.Addr and serves until Shutdown.
func Start(cfg Config) (d *Daemon, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := prepareDataDir(cfg.DataDir, log); err != nil {
		return nil, err
	}
	// Before anything makes files (the database, the CA): does the data
	// dir show an earlier controller?
	earlier := earlierController(cfg.DataDir)
	if earlier && !cfg.shared() && dbMissing(cfg.DataDir) { // an etcd store keeps no database here
		if err := refuseNewController(cfg.DataDir, "no database (provisiond.db is missing or empty)", cfg.Reinitialise, log); err != nil {
			return nil, err
		}
	}
	d = &Daemon{cfg: cfg, log: log, hub: watcher.NewHub(), entities: facade.NewEntityLimits(cfg.MaxConnsPerEntity, cfg.MaxWatchersPerEntity), environ: environ.New(), done: make(chan struct{}), failure: newStoreFailure(),
		serverID: newServerID(), earlier: earlier}
	d.health.d = d
	backup.RemoveStale(cfg.DataDir, log)
	d.metrics = newMetrics(func() float64 { return float64(d.hub.Subscriptions()) },
		func() float64 {
			if d.state == nil {
				return 0
			}
			return float64(d.state.Revision())
		})

	d.registerServiceMetrics()
	d.history.setRetention(cfg.HistoryRetention)
	if d.audit, err = newAuditor(log, cfg.AuditLog); err != nil {
		return nil, err
	}
	started := d // a failed Start returns a nil d
	defer func() {
		if err != nil {
			_ = started.stopService(context.Background())
		}
	}()

	d.state, err = d.openState()
	if err != nil {
		return nil, err
	}
	st := d.state // a failed Start returns a nil d
	defer func() {
		if err != nil {
			st.Close()
		}
	}()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	addrs := listenAddresses(ln.Addr().(*net.TCPAddr))

	hosts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		h, _, _ := net.SplitHostPort(a)
		hosts = append(hosts, h)
	}
	switch {
	case cfg.CertFile != "":
		d.tls, err = pki.LoadFiles(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
	case !cfg.shared():
		d.tls, err = pki.LoadOrCreate(cfg.DataDir, hosts)
	}
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	if cfg.shared() {
		err = d.initialiseShared(addrs, hosts) // the TLS material is the controller's, from the store
	} else {
		err = d.initialise(addrs)
	}
	if err != nil {
		return nil, err
	}
	tlsCfg, err := d.tls.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	if tlsCfg, err = d.liveTLS(tlsCfg, hosts); err != nil {
		return nil, err
	}
	apiTLS(tlsCfg)

	d.hostPorts = hostPortsOf(addrs)
	if err := d.register(d.hostPorts); err != nil {
		return nil, err
	}
	unregister := d.unregister // a failed Start returns a nil d
	defer func() {
		if err != nil {
			unregister()
		}
	}()

	d.throttle = d.newThrottle()
	if d.metricsToken, err = readToken(cfg.MetricsTokenFile); err != nil {
		return nil, err
	}
	d.limiter = admin.NewLimiter(admin.LimiterConfig{
		Max: cfg.LoginRateMax, Refill: cfg.LoginRateRefill, Concurrent: cfg.LoginConcurrent, Wait: loginWait,
		Throttle: d.throttle,
	})
	reg := NewRegistry(d.limiter)

	deps := &facade.Deps{
		ServerID:      d.serverID,
		State:         d.state,
		Hub:           d.hub,
		Registry:      reg,
		Logger:        log,
		ServerVersion: ServerVersion,
		APIHostPorts:  d.apiHostPorts,
		PingTimeout:   cfg.PingTimeout,
		LoginTimeout:  cfg.LoginTimeout,
		MaxWatchers:   cfg.MaxWatchers,
		Entities:      d.entities,
		Environ:       d.environ,
		Clock:         cfg.Clock,
		Agents:        d.agentCounter(),
		Presence:      d.startPresence(),
		History: func(ctx context.Context) (state.HistoryStats, string, error) {
			st, err := d.historyStats(ctx)
			return st, d.HistoryRetention(), err
		},
	}
	if cfg.shared() {
		d.balance = d.newBalancer()
	}
	d.rebalance.Store(cfg.Rebalance)
	d.rpc, err = rpc.NewServer(rpc.Config{
		NewRoot:           d.noticeLogins(d.audit.audited(facade.NewRootFunc(deps))),
		Logger:            log,
		ReadLimit:         cfg.ReadLimit,
		PreLoginReadLimit: cfg.PreLoginReadLimit,
		MaxRequests:       cfg.MaxRequests,
		MaxBulkItems:      cfg.MaxBulkItems,
		MaxReplySize:      cfg.MaxReplySize,
		MaxUnsent:         cfg.MaxUnsent,
		WriteTimeout:      cfg.WriteTimeout,
		Settle:            d.hub.Sync,
		Observer:          d.metrics,
		Admit:             d.admit,
	})
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", d.handleHealth)
	mux.Handle("GET /metrics", d.metricsHandler(promhttp.HandlerFor(d.metrics.reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /backup", backup.NewHandler(backup.Config{
		DataDir: cfg.DataDir, State: d.state, Bolt: d.bolt, Shared: cfg.shared(), Controller: d.creds.ControllerUUID,
		Superuser: d.superuser, Writer: d.movingWriter, Logger: d.log,
	}))
	if err := d.serveAgentBinaries(mux); err != nil {
		return nil, err
	}
	mux.Handle("/", d.rpc)
	d.http = d.newHTTPServer(mux, tlsCfg)
	if err := d.serveDashboard(mux); err != nil {
		return nil, err
	}
	d.ln = d.listen(ln, tlsCfg)
	if err := d.serveMetrics(); err != nil {
		return nil, err
	}
	go func() {
		defer close(d.done)
		if err := d.http.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.serveErr = err
			log.Error("http server stopped", "err", err)
		}
	}()
	if cfg.shared() {
		d.startCluster()
	}
	d.binaries.Start()
	d.startSingular()
	log.Info("serving", "addr", ln.Addr().String(), "data-dir", cfg.DataDir,
		"controller", d.creds.ControllerUUID, "store", d.state.Store().Info().Engine, "server-id", d.serverID,
		"dashboard", "https://"+ln.Addr().String()+dashboard.Prefix,
		"credentials", filepath.Join(cfg.DataDir, CredentialsFile))
	d.startExpiryChecks()
	return d, nil
}

// NewRegistry registers every facade provisiond serves. Agent logins pass
// through limiter (nil: no limit).
func NewRegistry(limiter *admin.Limiter) *facade.Registry {
	reg := rpc.NewRegistry[*facade.Context]()
	admin.Register(reg, limiter)
	pinger.Register(reg)
	watchers.Register(reg)
	provisioner.Register(reg)
	modeladmin.Register(reg)
	caasunitprovisioner.Register(reg)
	machineundertaker.Register(reg)
	return reg
}

// initialise makes the controller on first start and writes (or
// refreshes) credentials.yaml.
func (d *Daemon) initialise(addrs []string) error {
	credsPath := filepath.Join(d.cfg.DataDir, CredentialsFile)
	ok, err := d.state.Initialized(context.Background())
	if err != nil {
		return err
	}
	// fresh: what is written now is new (a new controller, or a missing
	// credentials.yaml) and must be written; otherwise only the addresses
	// are refreshed, and failing to is a warning (a full disk at start).
	fresh := !ok
	if !ok {
		if d.earlier {
			if err := refuseNewController(d.cfg.DataDir, "a database that was never initialised", d.cfg.Reinitialise, d.log); err != nil {
				return err
			}
		}
		creds := Credentials{
			AdminUser:     "admin",
			AdminPassword: randomPassword(),
			ControllerAgent: ControllerAgent{
				Tag:      "machine-0",
				Password: randomPassword(),
				Nonce:    "user-admin:bootstrap",
			},
		}
		res, err := d.state.Initialize(context.Background(), state.InitArgs{
			AdminPassword: creds.AdminPassword,
			AgentPassword: creds.ControllerAgent.Password,
			AgentNonce:    creds.ControllerAgent.Nonce,
			ModelConfig:   map[string]any{"agent-version": ServerVersion},
		})
		if err != nil {
			return fmt.Errorf("initialise data dir: %w", err)
		}
		creds.ControllerUUID = res.ControllerUUID
		creds.ControllerModelUUID = res.ControllerModelUUID
		creds.DefaultModelUUID = res.DefaultModelUUID
		d.creds = creds
		d.log.Info("initialised data dir", "controller", res.ControllerUUID)
	} else {
		old, err := ReadCredentials(credsPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			d.log.Warn("credentials.yaml is missing; rewriting it without passwords (provisiond reset-admin-password makes new ones)", "path", credsPath)
			fresh = true
			ctrl, err := d.state.Controller(context.Background())
			if err != nil {
				return err
			}
			d.creds = Credentials{ControllerUUID: ctrl.UUID, ControllerModelUUID: ctrl.ModelUUID, AdminUser: "admin"}
			if m, err := d.state.ModelByName(context.Background(), "default"); err == nil {
				d.creds.DefaultModelUUID = m.UUID
			}
		case err != nil:
			return err
		default:
			d.creds = *old
		}
	}
	d.creds.APIAddresses = addrs
	d.creds.CACert = string(d.tls.CACertPEM)
	// api-port is the port the daemon listens on now (--addr :0 picks one).
	_, port, _ := net.SplitHostPort(addrs[0])
	apiPort, _ := strconv.Atoi(port)
	ctrl, err := d.state.Controller(context.Background())
	if err != nil {
		return err
	}
	newCA := ctrl.Config["ca-cert"] != d.creds.CACert
	if err := d.state.UpdateControllerConfig(context.Background(), map[string]any{"ca-cert": d.creds.CACert, "api-port": apiPort}, nil); err != nil {
		if fresh || newCA {
			return fmt.Errorf("record CA certificate and API port: %w", err)
		}
		d.log.Warn("cannot record the API port; serving anyway", "err", err)
	}
	if credentialsUnchanged(credsPath, &d.creds) {
		return nil
	}
	if err := WriteCredentials(credsPath, &d.creds); err != nil {
		if fresh || newCA {
			return fmt.Errorf("write credentials: %w", err)
		}
		d.log.Warn("cannot refresh the api-addresses of credentials.yaml; serving anyway", "path", credsPath, "err", err)
	}
	return nil
}

// Addr is the address the daemon listens on (host:port).
func (d *Daemon) Addr() string { return d.ln.Addr().String() }

// Credentials returns the daemon's credentials (as in credentials.yaml).
func (d *Daemon) Credentials() Credentials {
	d.credsMu.Lock()
	defer d.credsMu.Unlock()
	c := d.creds
	c.APIAddresses = slices.Clone(c.APIAddresses)
	return c
}

// ServerID names this daemon among the controller's live API servers.
func (d *Daemon) ServerID() string { return d.serverID }

// State is the daemon's state, for in-process tests and tools.
func (d *Daemon) State() *state.State { return d.state }

// Environ is the daemon's built-in provider.
func (d *Daemon) Environ() *environ.Provider { return d.environ }

// Hub is the daemon's watcher hub.
func (d *Daemon) Hub() *watcher.Hub { return d.hub }

// RPC is the daemon's rpc server.
func (d *Daemon) RPC() *rpc.Server { return d.rpc }

// Done is closed when the HTTP server has stopped.
func (d *Daemon) Done() <-chan struct{} { return d.done }

// clusterStopWait is how long Shutdown waits at most for the shared-store
// goroutines before closing the store under them (cluster.stop).
const clusterStopWait = 5 * time.Second

// stopReserve is the part of a Shutdown's budget kept from the
// connections for the steps after them: at most a fifth of the budget.
const stopReserve = 2 * time.Second

// Shutdown stops the daemon within ctx's deadline, if it has one:
//
//  1. stop accepting and close every connection (close code 1001), waiting
//     for the calls under way to be answered, until ctx's deadline less a
//     reserve (stopReserve, at most a fifth); connections still open then
//     are cut (their sockets closed). Their ends are not counted out
//     one by one (presence, the hub's subscriptions, the per-entity
//     limits and the connection cap: Retire, Listener.Close).
//     Meanwhile, from the start, tell the daemons sharing the store that this one is going: on etcd one
//     request revokes its lease, which removes its API-server record and
//     presence and ends its leaderships for every daemon at once (their
//     agents' address watchers learn it while this daemon's connections
//     close, and a slow etcd costs the stop no time of its own);
//  2. wait for that request, within the deadline;
//  3. stop the daemon's own goroutines (singular workers, the shared
//     store's followers, agent binaries), waiting at most clusterStopWait
//     and never past the deadline before closing the store under them;
//  4. close the store (writes in progress commit first), then the metrics
//     listener and the audit log.
//
// Running out of the budget is not a failure (what was acknowledged is
// durable; what etcd was not told goes when the lease expires): it is
// logged as a warning, with what was cut. Shutdown returns an error only
// for what failed to close. Each step's time is logged at the end.
func (d *Daemon) Shutdown(ctx context.Context) error {
	t0 := time.Now()
	cctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		reserve := min(stopReserve, time.Until(dl)/5)
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	// The connections about to end all at once are not counted out one
	// by one: the departure below says they all ended, and the process's
	// end drops the rest (each of these queued thousands of teardowns on
	// its locks). The listener, closed first, counts them out no more.
	d.presence.Retire()
	d.hub.Retire()
	d.entities.Retire()
	departed := make(chan error, 1) // the goroutine is Shutdown's: waited for below
	go func() {
		err := d.state.Depart(ctx)
		d.log.Debug("stopping: departed", "took", time.Since(t0).Round(time.Millisecond), "err", err)
		departed <- err
	}()
	// Stop accepting first; http.Server.Shutdown does not wait for
	// hijacked (websocket) connections, rpc.Server.Shutdown does.
	conns := d.rpc.Conns()
	if err := d.http.Shutdown(cctx); err != nil {
		d.log.Warn("stopping: HTTP requests still under way at the stop's deadline are cut", "err", err)
		_ = d.http.Close()
	}
	if err := d.rpc.Shutdown(cctx); err != nil {
		d.log.Warn("stopping: connections still closing at the stop's deadline are cut",
			"connections", conns, "cut", d.rpc.Conns(), "err", err)
	}
	<-d.done
	tConns := time.Since(t0)

	t1 := time.Now()
	if err := <-departed; err != nil { // bounded by ctx and etcd's request timeout
		d.log.Warn("stopping: could not tell the other daemons this one is going", "err", err)
	}
	tDepart := time.Since(t1) // beyond the connections' time

	t2 := time.Now()
	wait := clusterStopWait
	if dl, ok := ctx.Deadline(); ok {
		wait = max(0, min(wait, time.Until(dl)))
	}
	d.singular.Cancel() // waited for below, with the cluster's
	clusterStopped := d.cluster.stop(wait)
	singularStopped := d.singular.Stop(max(0, wait-time.Since(t2)))
	d.binaries.Stop()
	d.unregister() // bbolt: the record goes now; etcd: Depart took it
	tWorkers := time.Since(t2)

	t3 := time.Now()
	serr := d.state.Close()
	if !clusterStopped {
		d.cluster.wait() // the store's close ends what etcd's client held
	}
	if !singularStopped {
		d.singular.Wait()
	}
	verr := d.stopService(ctx)
	d.log.Info("shutdown", "took", time.Since(t0).Round(time.Millisecond),
		"connections", tConns.Round(time.Millisecond), "depart-after", tDepart.Round(time.Millisecond),
		"workers", tWorkers.Round(time.Millisecond), "store", time.Since(t3).Round(time.Millisecond))
	return errors.Join(serr, verr)
}

// Drain stops accepting API connections and closes the open ones spread
// evenly over the duration over (rpc.Server.Drain): a stop of one of
// several daemons sharing a store, in a rolling restart, hands its agents
// to the others a share at a time, each agent without a daemon only for
// its own reconnection, instead of all of them at once. Everything else
// goes on serving meanwhile: the agents not yet told, the daemon's
// workers and leaderships, its API-server record (an agent that dials
// this daemon is refused and tries the next address it knows). It
// returns once every connection has been told to close, or when ctx ends
// or drainSlack past over has passed, whichever comes first; Shutdown
// follows, for the rest. A drain of 0 or less does nothing.
func (d *Daemon) Drain(ctx context.Context, over time.Duration) error {
	if over <= 0 {
		return nil
	}
	ctx, cancelDrain := context.WithTimeout(ctx, over+drainSlack)
	defer cancelDrain()
	t0 := time.Now()
	d.draining.Store(true) // the other daemons learn it from its load record (balance.go)
	d.log.Info("draining: closing the API connections a share at a time", "connections", d.rpc.Conns(), "over", over)
	// Stop accepting: the listener closes. HTTP requests under way (an
	// agent binary's download, a backup) go on; Shutdown waits for them.
	hctx, cancel := context.WithCancel(ctx)
	listening := make(chan struct{}) // the goroutine is Drain's: waited for below
	go func() {
		defer close(listening)
		_ = d.http.Shutdown(hctx) // returns once cancelled, if requests are still under way
	}()
	err := d.rpc.Drain(ctx, over)
	cancel()
	<-listening
	d.log.Info("drained", "took", time.Since(t0).Round(time.Millisecond), "left", d.rpc.Conns(), "err", err)
	return err
}

// drainSlack is how long past its duration a drain may run (its last
// share told on a slow box) before the stop goes on without it.
const drainSlack = 5 * time.Second

func randomPassword() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// listenAddresses lists the host:port strings clients can use: the listen
// address itself, or every interface address when it is unspecified.
func listenAddresses(a *net.TCPAddr) []string {
	port := strconv.Itoa(a.Port)
	if !a.IP.IsUnspecified() {
		return []string{net.JoinHostPort(a.IP.String(), port)}
	}
	var out []string
	ifaddrs, _ := net.InterfaceAddrs()
	for _, ia := range ifaddrs {
		ipn, ok := ia.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if a.IP.To4() != nil && ipn.IP.To4() == nil {
			continue
		}
		out = append(out, net.JoinHostPort(ipn.IP.String(), port))
	}
	if len(out) == 0 {
		out = []string{net.JoinHostPort("127.0.0.1", port)}
	}
	return out
}

func hostPortsOf(addrs []string) []params.HostPort {
	out := make([]params.HostPort, 0, len(addrs))
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		p, _ := strconv.Atoi(port)
		hp := params.HostPort{Value: host, Port: p, Type: "hostname", Scope: "public"}
		if ip := net.ParseIP(host); ip != nil {
			hp.Type = "ipv4"
			if ip.To4() == nil {
				hp.Type = "ipv6"
			}
			switch {
			case ip.IsLoopback():
				hp.Scope = "local-machine"
			case ip.IsLinkLocalUnicast():
				hp.Scope = "link-local"
			case ip.IsPrivate():
				hp.Scope = "local-cloud"
			}
		}
		out = append(out, hp)
	}
	return out
}

func stateHostPorts(hps []params.HostPort) [][]state.HostPort {
	out := make([]state.HostPort, len(hps))
	for i, hp := range hps {
		out[i] = state.HostPort{Value: hp.Value, Type: hp.Type, Scope: hp.Scope, Port: hp.Port}
	}
	return [][]state.HostPort{out}
}
