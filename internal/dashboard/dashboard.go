package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// Prefix is the path the dashboard is served under.
const Prefix = "/dashboard/"

// Reader is what the dashboard reads of the state: these methods and no
// others, so it cannot change anything. The daemon passes its state.
type Reader interface {
	Controller(ctx context.Context) (state.Controller, error)
	Models(ctx context.Context) ([]state.Model, error)
	Model(ctx context.Context, uuid string) (state.Model, error)
	ModelByName(ctx context.Context, name string) (state.Model, error)
	User(ctx context.Context, name string) (state.User, error)
	CheckUserPassword(ctx context.Context, name, password string) (state.User, error)
	Revision() uint64
	// The cluster view: the live API servers and the agents each has.
	APIServers(ctx context.Context) ([]state.APIServer, error)
	PresenceRecords(ctx context.Context) ([]state.PresenceRecord, error)
}

// Throttle slows down password guessing: the daemon's failed-login
// throttle, shared with the API's user logins. A nil Throttle throttles
// nothing.
type Throttle interface {
	// Begin lets a login by user from remote (host:port) go ahead, or says
	// how long it must wait before its password is checked.
	Begin(user, remote string) (LoginAttempt, time.Duration)
}

// LoginAttempt is a login the Throttle let through; exactly one of its
// methods is called once the outcome is known.
type LoginAttempt interface {
	Failed()    // a wrong password or an unknown user
	Succeeded() // the right password
	Abandon()   // the check itself failed
}

// Counters are the daemon's own running totals, read from its metrics for
// the chart: the sampler turns them into rates.
type Counters struct {
	Requests float64 // API requests answered (provisiond_requests_total)
	Logins   float64 // Admin.Login calls (provisiond_logins_total)
	Agents   float64 // connections logged in as machine agents now
	// CommitSeconds and Commits are the sum and count of the commit
	// duration histogram (provisiond_commit_duration_seconds).
	CommitSeconds float64
	Commits       float64
}

// Config is what New needs. State, Hub, Status and Pools are required.
type Config struct {
	State Reader
	Hub   *watcher.Hub
	// Status and Pools read a model as provisionctl status shows it
	// (modeladmin.StatusOf, modeladmin.StoragePoolsOf).
	Status func(context.Context, state.Model) (params.ModelStatus, error)
	Pools  func(context.Context, state.Model) ([]params.StoragePoolInfo, error)
	// History reads the history of commits as ModelAdmin.History does
	// (modeladmin.HistoryOf): the history panels. nil: none.
	History func(context.Context, params.HistoryArgs) (params.HistoryResult, error)
	// OnPresence, if set, calls its argument with a model's UUID whenever
	// an agent of the model goes alive or down, until the returned cancel
	// is called (the daemon's presence.Recorder.OnChange): the model's
	// streams send a fresh snapshot. The function given must not block.
	OnPresence func(func(model string)) (cancel func())
	// Counters reads the daemon's metrics (nil: the chart stays empty).
	Counters func() Counters
	// The cluster view. ServerID is this daemon's id among the API
	// servers (state.APIServer.ID), StoreEngine the store's ("bbolt",
	// "etcd"); Health is the daemon's /health check (nil: none shown);
	// StoreMembers, on etcd, what the store last learned of each member
	// (nil: none).
	ServerID     string
	StoreEngine  string
	Health       func() error
	StoreMembers func() []StoreMember
	// Throttle is the failed-login throttle (nil: none).
	Throttle Throttle
	Logger   *slog.Logger
	// Now is the clock of sessions (nil: time.Now); tests move it.
	Now func() time.Time
	// WriteTimeout bounds each write of a stream (the daemon's
	// --write-timeout); 0: DefaultWriteTimeout.
	WriteTimeout time.Duration

	// Bounds; zero values take the defaults below.
	SessionLifetime      time.Duration // a session ends this long after its login
	SessionIdle          time.Duration // ... or after this long without a request or an open stream
	MaxSessions          int           // sessions in all
	MaxSessionsPerUser   int           // sessions of one user (a new login ends the oldest)
	MaxStreamsPerSession int           // event streams of one session (a new one ends the oldest)
	SnapshotInterval     time.Duration // a stream sends at most one model snapshot per interval
}

// Defaults.
const (
	DefaultSessionLifetime      = 8 * time.Hour
	DefaultSessionIdle          = time.Hour
	DefaultMaxSessions          = 256
	DefaultMaxSessionsPerUser   = 8
	DefaultMaxStreamsPerSession = 4
	DefaultSnapshotInterval     = 200 * time.Millisecond
	DefaultWriteTimeout         = 30 * time.Second
)

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.SessionLifetime <= 0 {
		c.SessionLifetime = DefaultSessionLifetime
	}
	if c.SessionIdle <= 0 {
		c.SessionIdle = DefaultSessionIdle
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.MaxSessionsPerUser <= 0 {
		c.MaxSessionsPerUser = DefaultMaxSessionsPerUser
	}
	if c.MaxStreamsPerSession <= 0 {
		c.MaxStreamsPerSession = DefaultMaxStreamsPerSession
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
}

// Dashboard is the status page. Handler serves it; Close ends every
// session and stream.
type Dashboard struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	feed     *feed
	sampler  *sampler
	clusterCache
	csrf *http.CrossOriginProtection
	mux  *http.ServeMux

	// closing is cancelled by Close: every stream returns.
	closing context.Context
	close   context.CancelFunc
	once    sync.Once
}

// New returns a dashboard reading cfg.State and following cfg.Hub. Its hub
// subscriptions last until Close.
func New(cfg Config) (*Dashboard, error) {
	if cfg.State == nil || cfg.Hub == nil || cfg.Status == nil || cfg.Pools == nil {
		return nil, errors.New("dashboard: State, Hub, Status and Pools are required")
	}
	cfg.setDefaults()
	d := &Dashboard{cfg: cfg, log: cfg.Logger, csrf: http.NewCrossOriginProtection()}
	d.closing, d.close = context.WithCancel(context.Background())
	d.sessions = newSessions(&d.cfg)
	d.feed = newFeed(cfg.Hub, cfg.Now, d.sessions.credentialsChanged)
	if cfg.OnPresence != nil {
		d.feed.cancels = append(d.feed.cancels, cfg.OnPresence(d.feed.presenceChanged))
	}
	d.sampler = newSampler(cfg.Counters, time.Now)
	d.routes()
	return d, nil
}

// Close ends every session (their streams say "shutdown" and return) and
// cancels the hub subscriptions. It does not wait for the streams: the
// HTTP server's Shutdown does. Idempotent.
func (d *Dashboard) Close() {
	d.once.Do(func() {
		d.close()
		d.feed.close()
		d.sessions.closeAll(reasonShutdown)
	})
}
