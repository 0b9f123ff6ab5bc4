package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/agentbinaries"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// options are the settings of `provisiond serve`. Each comes from, in order
// of precedence: a flag, the environment (PROVISIOND_<NAME>), the YAML file
// given by --config (key <name>), or the default.
type options struct {
	DataDir   string `yaml:"data-dir"`
	Addr      string `yaml:"addr"`
	LogFormat string `yaml:"log-format"`
	LogLevel  string `yaml:"log-level"`
	CertFile  string `yaml:"cert-file"`
	KeyFile   string `yaml:"key-file"`
	CAFile    string `yaml:"ca-file"`

	// The store: bbolt in the data dir, or an etcd cluster several
	// daemons share (docs/scale-out.md).
	Store                  string        `yaml:"store"`
	EtcdEndpoints          string        `yaml:"etcd-endpoints"`
	EtcdPrefix             string        `yaml:"etcd-prefix"`
	EtcdCAFile             string        `yaml:"etcd-ca-file"`
	EtcdCertFile           string        `yaml:"etcd-cert-file"`
	EtcdKeyFile            string        `yaml:"etcd-key-file"`
	EtcdUsername           string        `yaml:"etcd-username"`
	EtcdPassword           string        `yaml:"etcd-password"`
	EtcdDialTimeout        time.Duration `yaml:"etcd-dial-timeout"`
	EtcdRequestTimeout     time.Duration `yaml:"etcd-request-timeout"`
	EtcdLeaseTTL           time.Duration `yaml:"etcd-lease-ttl"`
	EtcdCompactionInterval time.Duration `yaml:"etcd-compaction-interval"`
	EtcdMaxTxnOps          int           `yaml:"etcd-max-txn-ops"`
	EtcdMaxRequestBytes    int           `yaml:"etcd-max-request-bytes"`
	EtcdCommitsInFlight    int           `yaml:"etcd-commits-in-flight"`

	ReadLimit       int64         `yaml:"read-limit"`
	MaxRequests     int           `yaml:"max-requests"`
	MaxConns        int           `yaml:"max-connections"`
	MaxWatchers     int           `yaml:"max-watchers"`
	WriteTimeout    time.Duration `yaml:"write-timeout"`
	PingTimeout     time.Duration `yaml:"ping-timeout"`
	LoginTimeout    time.Duration `yaml:"login-timeout"`
	LoginRateMax    int           `yaml:"login-rate-max"`
	LoginRateRefill time.Duration `yaml:"login-rate-refill"`
	LoginConcurrent int           `yaml:"login-concurrent"`
	ShedLatency     time.Duration `yaml:"shed-latency"`

	PreLoginReadLimit int64         `yaml:"prelogin-read-limit"`
	MaxBulkItems      int           `yaml:"max-bulk-items"`
	MaxReplySize      int64         `yaml:"max-reply-size"`
	MaxUnsent         int64         `yaml:"max-unsent"`
	MaxHeaderBytes    int           `yaml:"max-header-bytes"`
	IdleTimeout       time.Duration `yaml:"idle-timeout"`
	ShutdownTimeout   time.Duration `yaml:"shutdown-timeout"`
	Drain             time.Duration `yaml:"drain"`
	Rebalance         bool          `yaml:"rebalance"`

	MaxAgentBinarySize int64 `yaml:"max-agent-binary-size"`

	// GCHeapFloor is a removed setting, still parsed so that a config
	// file, unit or environment that sets it is refused with a message
	// naming its replacement (errRemovedGCHeapFloor) rather than as an
	// unknown name; 0, what the daemon now does, is accepted.
	GCHeapFloor int64 `yaml:"gc-heap-floor"`

	// Agent runs the reference agent in the daemon's process: "sim".
	Agent string `yaml:"agent"`

	// Reinitialise is --reinitialise, a flag only: it is meant once, so
	// neither the environment nor the config file may set it.
	Reinitialise bool `yaml:"-"`

	MaxConnsPerEntity    int `yaml:"max-connections-per-entity"`
	MaxPendingConns      int `yaml:"max-pending-connections"`
	MaxPendingPerAddress int `yaml:"max-pending-per-address"`
	MaxWatchersPerEntity int `yaml:"max-watchers-per-entity"`

	LoginFailures    int           `yaml:"login-failures"`
	LoginBackoffMax  time.Duration `yaml:"login-backoff-max"`
	MetricsAuth      string        `yaml:"metrics-auth"`
	MetricsTokenFile string        `yaml:"metrics-token-file"`

	// The daemon as a service (docs/operator-guide.md, As a system service).
	MetricsAddr string `yaml:"metrics-addr"`
	AuditLog    string `yaml:"audit-log"`

	// HistoryRetention is --history-retention as written; resolve reads
	// it into historyRetention, refusing what does not read.
	HistoryRetention string `yaml:"history-retention"`
	historyRetention store.Retention
}

// defaultDataDir is $XDG_DATA_HOME/provisiond, or ~/.local/share/provisiond
// (shared with provisionctl, which looks for credentials.yaml there).
func defaultDataDir(getenv func(string) string) string {
	return credentials.DefaultDataDir(getenv)
}

func defaultOptions(getenv func(string) string) options {
	d := daemon.Default(defaultDataDir(getenv))
	return options{
		DataDir:                d.DataDir,
		Addr:                   d.Addr,
		LogFormat:              "text",
		LogLevel:               "info",
		Store:                  daemon.StoreBolt,
		EtcdPrefix:             "/provisiond/",
		EtcdDialTimeout:        5 * time.Second,
		EtcdRequestTimeout:     5 * time.Second,
		EtcdLeaseTTL:           etcdstore.DefaultLeaseTTL,
		EtcdCompactionInterval: daemon.DefaultCompactionInterval,
		EtcdMaxTxnOps:          etcdstore.DefaultMaxTxnOps,
		EtcdMaxRequestBytes:    etcdstore.DefaultMaxRequestBytes,
		EtcdCommitsInFlight:    etcdstore.DefaultCommitsInFlight,
		ReadLimit:              d.ReadLimit,
		MaxRequests:            d.MaxRequests,
		MaxConns:               d.MaxConns,
		MaxWatchers:            d.MaxWatchers,
		WriteTimeout:           d.WriteTimeout,
		PingTimeout:            d.PingTimeout,
		LoginTimeout:           d.LoginTimeout,
		LoginRateMax:           d.LoginRateMax,
		LoginRateRefill:        d.LoginRateRefill,
		LoginConcurrent:        d.LoginConcurrent,
		ShedLatency:            d.ShedLatency,

		PreLoginReadLimit: d.PreLoginReadLimit,
		MaxBulkItems:      d.MaxBulkItems,
		MaxReplySize:      d.MaxReplySize,
		MaxUnsent:         d.MaxUnsent,
		MaxHeaderBytes:    d.MaxHeaderBytes,
		IdleTimeout:       d.IdleTimeout,
		ShutdownTimeout:   DefaultShutdownTimeout,
		Rebalance:         d.Rebalance,

		MaxAgentBinarySize: agentbinaries.DefaultMaxSize,

		MaxConnsPerEntity:    d.MaxConnsPerEntity,
		MaxWatchersPerEntity: d.MaxWatchersPerEntity,

		LoginFailures:    d.LoginFailures,
		LoginBackoffMax:  d.LoginBackoffMax,
		MetricsAuth:      d.MetricsAuth,
		HistoryRetention: store.DefaultRetention.String(),
	}
}

// setting binds one option to its flag, environment variable and YAML key.
type setting struct {
	name  string // flag name and YAML key
	usage string
	ptr   any // *string, *int, *int64 or *time.Duration
}

func (o *options) settings() []setting {
	return []setting{
		{"data-dir", "data directory (database, TLS material, credentials.yaml)", &o.DataDir},
		{"addr", "listen address host:port (port 0 picks a free one)", &o.Addr},
		{"log-format", "log format: text or json", &o.LogFormat},
		{"log-level", "log level: debug, info, warn or error", &o.LogLevel},
		{"cert-file", "server certificate PEM (default: made by the daemon)", &o.CertFile},
		{"key-file", "server key PEM, with --cert-file", &o.KeyFile},
		{"ca-file", "CA certificate PEM the server certificate chains to", &o.CAFile},
		{"store", "where the controller lives: bbolt (provisiond.db in the data dir) or etcd (shared by several daemons)", &o.Store},
		{"etcd-endpoints", "etcd client URLs, comma-separated (https://h1:2379,https://h2:2379), with --store etcd", &o.EtcdEndpoints},
		{"etcd-prefix", "etcd key prefix holding the controller", &o.EtcdPrefix},
		{"etcd-ca-file", "CA certificate PEM etcd's certificate chains to", &o.EtcdCAFile},
		{"etcd-cert-file", "client certificate PEM for etcd's --client-cert-auth", &o.EtcdCertFile},
		{"etcd-key-file", "client key PEM, with --etcd-cert-file", &o.EtcdKeyFile},
		{"etcd-username", "etcd auth user", &o.EtcdUsername},
		{"etcd-password", "etcd auth password (prefer $PROVISIOND_ETCD_PASSWORD or the config file: a flag shows in ps)", &o.EtcdPassword},
		{"etcd-dial-timeout", "how long to wait for etcd at start", &o.EtcdDialTimeout},
		{"etcd-request-timeout", "how long a call waits for etcd before failing with code try again", &o.EtcdRequestTimeout},
		{"etcd-lease-ttl", "how long a dead daemon stays listed among the API servers", &o.EtcdLeaseTTL},
		{"etcd-compaction-interval", "how often the elected daemon compacts etcd's history (negative: never; run etcd's own)", &o.EtcdCompactionInterval},
		{"etcd-max-txn-ops", "the cluster's --max-txn-ops", &o.EtcdMaxTxnOps},
		{"etcd-max-request-bytes", "the cluster's --max-request-bytes", &o.EtcdMaxRequestBytes},
		{"etcd-commits-in-flight", "etcd transactions of writes this daemon has in flight at once; writes waiting meanwhile go together in the next", &o.EtcdCommitsInFlight},
		{"read-limit", "largest accepted message in bytes; larger closes the connection (1009)", &o.ReadLimit},
		{"max-requests", "concurrent requests per connection", &o.MaxRequests},
		{"max-connections", "open TCP connections, API and HTTP (default: sized to the file limit and memory)", &o.MaxConns},
		{"max-watchers", "watchers per connection (0: unlimited)", &o.MaxWatchers},
		{"write-timeout", "write deadline; a client that stops reading is dropped after it", &o.WriteTimeout},
		{"ping-timeout", "close agent connections that do not ping for this long", &o.PingTimeout},
		{"login-timeout", "close connections that have not logged in within this long (0: never)", &o.LoginTimeout},
		{"login-rate-max", "agent login token bucket size (0: no rate limit)", &o.LoginRateMax},
		{"login-rate-refill", "time to earn one agent login token", &o.LoginRateRefill},
		{"login-concurrent", "agent logins in progress at once (0: unlimited)", &o.LoginConcurrent},
		{"shed-latency", "refuse new connections (but the local operator's first 8) while the p99 of the daemon's goroutines' waits to run is at least this (0: never)", &o.ShedLatency},
		{"prelogin-read-limit", "largest accepted message in bytes before login", &o.PreLoginReadLimit},
		{"max-bulk-items", "list items in one call, and in the calls running on one connection", &o.MaxBulkItems},
		{"max-reply-size", "largest reply in bytes; a larger one is refused (quota limit exceeded)", &o.MaxReplySize},
		{"max-unsent", "bytes of replies one connection may have waiting to be written", &o.MaxUnsent},
		{"max-header-bytes", "largest HTTP request header in bytes", &o.MaxHeaderBytes},
		{"idle-timeout", "close HTTP keep-alive connections idle for this long", &o.IdleTimeout},
		{"shutdown-timeout", "how long a stop (SIGINT, SIGTERM) may take: connections still closing then are cut, and what etcd is not told by then goes when the lease expires", &o.ShutdownTimeout},
		{"drain", "before a stop (SIGINT, SIGTERM): stop accepting and close the API connections spread evenly over this long, so that the other daemons sharing the store take the agents a share at a time (0: all at once, within --shutdown-timeout)", &o.Drain},
		{"rebalance", "with several daemons sharing the store, while another holds well under its share of the API connections: at or over its share refuse new ones, well over it hand a few agents at a time to the others (--rebalance=false: never); a reload changes it", &o.Rebalance},
		{"max-agent-binary-size", "largest agent binaries upload in bytes", &o.MaxAgentBinarySize},
		{"gc-heap-floor", "removed: set $GOGC or $GOMEMLIMIT instead", &o.GCHeapFloor},
		{"agent", "run the reference agent in this process on its simulated cloud: sim (a demo; see provisionagent)", &o.Agent},
		{"max-connections-per-entity", "connections of one machine agent or non-superuser user (0: unlimited)", &o.MaxConnsPerEntity},
		{"max-pending-connections", "connections that have not logged in, the local operator's aside (0: half of --max-connections)", &o.MaxPendingConns},
		{"max-pending-per-address", "connections that have not logged in from one address, IPv6 /64 or local user (0: a sixteenth of --max-connections, at least 8, at most a quarter of --max-pending-connections)", &o.MaxPendingPerAddress},
		{"max-watchers-per-entity", "watchers of one machine agent or non-superuser user across its connections (0: unlimited)", &o.MaxWatchersPerEntity},
		{"login-failures", "failed logins of a user or an agent from one client before its logins from there back off", &o.LoginFailures},
		{"login-backoff-max", "the longest a login waits after failures (the wait doubles from 1s)", &o.LoginBackoffMax},
		{"metrics-auth", "who reads /metrics: local (loopback open, others authenticate), always, none", &o.MetricsAuth},
		{"metrics-token-file", "file holding a bearer token that opens /metrics", &o.MetricsTokenFile},
		{"metrics-addr", "also serve /metrics over plain HTTP here, on loopback only (127.0.0.1:9100)", &o.MetricsAddr},
		{"audit-log", "append the audit trail (every mutation, refused logins) to this file as JSON lines", &o.AuditLog},
		{"history-retention", "how much history of commits to keep: a duration (7d, 36h) and/or a number of revisions (500000), comma-separated; a reload changes it", &o.HistoryRetention},
	}
}

func envName(name string) string {
	return "PROVISIOND_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// serveFlags are the flags of serve, bound to a scratch copy of the
// options: which flags were given is known only after parsing, and the
// config file they name must be read before the layers are applied.
type serveFlags struct {
	scratch    options
	configFile string
}

// bindServeFlags adds serve's flags to fs.
func bindServeFlags(fs *pflag.FlagSet, getenv func(string) string) *serveFlags {
	sf := &serveFlags{scratch: defaultOptions(getenv)}
	fs.StringVar(&sf.configFile, "config", getenv("PROVISIOND_CONFIG"), "YAML config file (keys as the flag names)")
	for _, s := range sf.scratch.settings() {
		bindFlag(fs, s)
	}
	_ = fs.MarkHidden("gc-heap-floor")
	return sf
}

// errRemovedGCHeapFloor refuses a non-zero --gc-heap-floor (or
// $PROVISIOND_GC_HEAP_FLOOR, or gc-heap-floor in the config file): the
// heap floor is gone, and the Go runtime's own GOGC and GOMEMLIMIT tune
// the collector. A daemon that silently dropped it would collect several
// times as often as its operator asked for.
var errRemovedGCHeapFloor = errors.New("gc-heap-floor was removed: drop it and set the Go runtime's GOGC (e.g. GOGC=400) or GOMEMLIMIT (e.g. GOMEMLIMIT=512MiB) in the daemon's environment instead (docs/operator-guide.md, Memory and the garbage collector)")

// resolve applies defaults, then the YAML file, then the environment,
// then the flags given in fs.
func (sf *serveFlags) resolve(fs *pflag.FlagSet, getenv func(string) string) (options, error) {
	o := defaultOptions(getenv)
	file := sf.configFile
	if file == "" {
		file = systemdConfigFile(getenv)
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return o, fmt.Errorf("config file: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&o); err != nil && !errors.Is(err, io.EOF) {
			return o, fmt.Errorf("config file %s: %w", file, err)
		}
	}
	for _, s := range o.settings() {
		if v := getenv(envName(s.name)); v != "" {
			if err := setValue(s.ptr, v); err != nil {
				return o, fmt.Errorf("$%s: %w", envName(s.name), err)
			}
		}
	}
	for _, s := range o.settings() {
		if f := fs.Lookup(s.name); f != nil && f.Changed {
			if err := setValue(s.ptr, f.Value.String()); err != nil {
				return o, fmt.Errorf("--%s: %w", s.name, err)
			}
		}
	}
	if o.GCHeapFloor != 0 {
		return o, errRemovedGCHeapFloor
	}
	if o.ShutdownTimeout <= 0 {
		return o, fmt.Errorf("--shutdown-timeout: %s: want a duration above 0", o.ShutdownTimeout)
	}
	if o.Drain < 0 || o.Drain > maxDrain {
		return o, fmt.Errorf("--drain: %s: want a duration from 0 to %s", o.Drain, maxDrain)
	}
	r, err := store.ParseRetention(o.HistoryRetention)
	if err != nil {
		return o, fmt.Errorf("--history-retention: %w", err)
	}
	o.historyRetention = r
	return o, nil
}

// maxDrain bounds --drain: a stop that takes longer is not one a service
// manager waits for.
const maxDrain = time.Hour

// DefaultShutdownTimeout is how long a stop may take (--shutdown-timeout),
// within the shipped unit's TimeoutStopSec (30 s) with room to spare.
const DefaultShutdownTimeout = 10 * time.Second

// ConfigFileName is the config file serve reads from systemd's
// ConfigurationDirectory= ($CONFIGURATION_DIRECTORY, /etc/provisiond in
// the shipped unit) when neither --config nor $PROVISIOND_CONFIG names one.
const ConfigFileName = "provisiond.yaml"

// systemdConfigFile is $CONFIGURATION_DIRECTORY/provisiond.yaml (the
// first directory of the list) when that file exists, else "".
func systemdConfigFile(getenv func(string) string) string {
	dir, _, _ := strings.Cut(getenv("CONFIGURATION_DIRECTORY"), ":")
	if dir == "" {
		return ""
	}
	path := filepath.Join(dir, ConfigFileName)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// loadOptions parses serve's arguments and resolves the options, as the
// serve command does.
func loadOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := pflag.NewFlagSet("provisiond serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := bindServeFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return sf.scratch, err
	}
	if fs.NArg() > 0 {
		return sf.scratch, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return sf.resolve(fs, getenv)
}

func bindFlag(fs *pflag.FlagSet, s setting) {
	switch p := s.ptr.(type) {
	case *string:
		fs.StringVar(p, s.name, *p, s.usage)
	case *int:
		fs.IntVar(p, s.name, *p, s.usage)
	case *int64:
		fs.Int64Var(p, s.name, *p, s.usage)
	case *time.Duration:
		fs.DurationVar(p, s.name, *p, s.usage)
	case *bool:
		fs.BoolVar(p, s.name, *p, s.usage)
	default:
		panic(fmt.Sprintf("unsupported option type %T", p))
	}
}

func setValue(ptr any, v string) error {
	switch p := ptr.(type) {
	case *string:
		*p = v
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = n
	case *int64:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*p = n
	case *time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration (like 30s or 3m)", v)
		}
		*p = d
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%q is not true or false", v)
		}
		*p = b
	}
	return nil
}

func (o *options) daemonConfig() daemon.Config {
	return daemon.Config{
		DataDir:  o.DataDir,
		Addr:     o.Addr,
		CertFile: o.CertFile,
		KeyFile:  o.KeyFile,
		CAFile:   o.CAFile,
		Store:    o.Store,
		Etcd: daemon.EtcdConfig{
			Endpoints:          splitList(o.EtcdEndpoints),
			Prefix:             o.EtcdPrefix,
			CAFile:             o.EtcdCAFile,
			CertFile:           o.EtcdCertFile,
			KeyFile:            o.EtcdKeyFile,
			Username:           o.EtcdUsername,
			Password:           o.EtcdPassword,
			DialTimeout:        o.EtcdDialTimeout,
			RequestTimeout:     o.EtcdRequestTimeout,
			LeaseTTL:           o.EtcdLeaseTTL,
			CompactionInterval: o.EtcdCompactionInterval,
			MaxTxnOps:          o.EtcdMaxTxnOps,
			MaxRequestBytes:    o.EtcdMaxRequestBytes,
			CommitsInFlight:    o.EtcdCommitsInFlight,
		},
		ReadLimit:       o.ReadLimit,
		MaxRequests:     o.MaxRequests,
		MaxConns:        o.MaxConns,
		MaxWatchers:     o.MaxWatchers,
		WriteTimeout:    o.WriteTimeout,
		PingTimeout:     o.PingTimeout,
		LoginTimeout:    o.LoginTimeout,
		LoginRateMax:    o.LoginRateMax,
		LoginRateRefill: o.LoginRateRefill,
		LoginConcurrent: o.LoginConcurrent,
		ShedLatency:     o.ShedLatency,

		PreLoginReadLimit:  o.PreLoginReadLimit,
		MaxBulkItems:       o.MaxBulkItems,
		MaxReplySize:       o.MaxReplySize,
		MaxUnsent:          o.MaxUnsent,
		MaxHeaderBytes:     o.MaxHeaderBytes,
		MaxAgentBinarySize: o.MaxAgentBinarySize,
		IdleTimeout:        o.IdleTimeout,

		MaxConnsPerEntity:    o.MaxConnsPerEntity,
		MaxPendingConns:      o.MaxPendingConns,
		MaxPendingPerAddress: o.MaxPendingPerAddress,
		MaxWatchersPerEntity: o.MaxWatchersPerEntity,
		Rebalance:            o.Rebalance,

		LoginFailures:    o.LoginFailures,
		LoginBackoffMax:  o.LoginBackoffMax,
		MetricsAuth:      o.MetricsAuth,
		MetricsTokenFile: o.MetricsTokenFile,
		Reinitialise:     o.Reinitialise,
		MetricsAddr:      o.MetricsAddr,
		AuditLog:         o.AuditLog,
		HistoryRetention: o.historyRetention,
	}
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// live are the settings a reload (SIGHUP) applies while serving; every
// other change needs a restart.
func (o *options) live() daemon.Live {
	return daemon.Live{LoginRateMax: o.LoginRateMax, LoginRateRefill: o.LoginRateRefill, HistoryRetention: o.historyRetention, Rebalance: o.Rebalance}
}
