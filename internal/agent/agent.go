package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Config says which daemon to work for and how.
type Config struct {
	// Credentials are the daemon's credentials.yaml: its addresses and
	// CA, the controller agent (which provisions) and the admin user
	// (which follows the models and reads their networks).
	Credentials *credentials.Credentials
	// Addrs, when set, replace the credentials' api-addresses.
	Addrs []string
	// Cloud is where instances and pods start; nil: a new SimCloud.
	Cloud Cloud
	// Logger receives the agent's records; nil discards them.
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before a worker whose
	// connection failed tries again (doubling, with jitter); defaults
	// 100 ms and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how often each connection pings; default 1 min.
	PingInterval time.Duration
	// DialTimeout bounds each dial; default 10 s.
	DialTimeout time.Duration
	// BufferSize is the websocket buffer size of each connection; zero
	// is the client's default (64 KiB). Many machine agents want less.
	BufferSize int
	// Observe, if set, is told of what the agent has done (for
	// provisionbench and tests). It is called from the agent's
	// goroutines and must return quickly.
	Observe func(Event)
}

// Event is something the agent has done, as Config.Observe is told.
type Event struct {
	Kind  EventKind
	Model string // the model's UUID
	// ID is the machine (or container) id, or the application's name.
	ID string
	// Units is the number of pods reported (EventUnitsReported).
	Units int
	// Watch is the Watch method whose watcher delivered the event
	// (EventWatched): WatchModels, WatchModelMachines, WatchContainers,
	// WatchApplications.
	Watch string
	// IDs are the ids the watcher delivered (EventWatched).
	IDs []string
	// Revision is the revision up to which the watcher's events so far
	// cover every change (EventWatched; 0: the daemon reports none).
	Revision uint64
	// From is the revision a Watch call resumed after; 0 for a fresh
	// watcher's initial event and for every later event (EventWatched).
	From uint64
	// Initial says the event is a Watch call's initial one (EventWatched).
	Initial bool
}

// EventKind says what an Event reports.
type EventKind string

// The events.
const (
	// EventMachineStarted: a machine's (or container's) agent logged in
	// for the first time and reported itself started.
	EventMachineStarted EventKind = "machine-started"
	// EventMachineRemoved: a provisioner removed a dead machine (or
	// container) after stopping its instance.
	EventMachineRemoved EventKind = "machine-removed"
	// EventUnitsReported: the unit provisioner reported an application's
	// pods (UpdateApplicationsUnits succeeded).
	EventUnitsReported EventKind = "units-reported"
	// EventApplicationRemoved: a dying application's pods were deleted
	// and its resources cleared.
	EventApplicationRemoved EventKind = "application-removed"
	// EventWatched: one of the lifecycle watchers the agent holds
	// delivered ids (its Watch call's initial event, or a Next), before
	// the agent acts on them.
	EventWatched EventKind = "watched"
)

func (a *Agent) observe(e Event) {
	if a.cfg.Observe != nil {
		a.cfg.Observe(e)
	}
}

// Agent is the reference agent: the controller agent's provisioners for
// every model of a daemon, and the machine agents of the machines they
// start. See the package documentation.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	cloud Cloud
	d     *dialer

	mu       sync.Mutex
	ctx      context.Context // Run's; nil before Run
	models   map[string]*worker
	machines map[string]*machineAgent // "<model>/<machine id>"
	wg       sync.WaitGroup           // every goroutine the agent started
	stopped  bool

	// modelsFrom is the revision up to which the events of the models'
	// watch cover every change, kept across followModels' runs (only its
	// goroutine uses it): the next run resumes after it.
	modelsFrom uint64
}

// worker is a goroutine the agent owns: cancel stops it, done is closed
// when it has returned.
type worker struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *worker) stop() {
	w.cancel()
	<-w.done
}

// New checks cfg and returns an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	creds := cfg.Credentials
	if creds == nil {
		return nil, errors.New("agent: no credentials")
	}
	if len(cfg.Addrs) == 0 {
		cfg.Addrs = creds.APIAddresses
	}
	switch {
	case len(cfg.Addrs) == 0:
		return nil, errors.New("agent: the credentials list no api-addresses")
	case creds.CACert == "":
		return nil, errors.New("agent: the credentials have no ca-cert")
	case creds.ControllerAgent.Tag == "" || creds.ControllerAgent.Password == "":
		return nil, errors.New("agent: the credentials have no controller-agent login")
	case creds.AdminPassword == "":
		return nil, errors.New("agent: the credentials have no admin-password")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(10*time.Second, cfg.MinBackoff)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Cloud == nil {
		cfg.Cloud = NewSimCloud()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{
		cfg: cfg, log: log, cloud: cfg.Cloud,
		models:   map[string]*worker{},
		machines: map[string]*machineAgent{},
	}
	a.d = &dialer{addrs: cfg.Addrs, caCert: []byte(creds.CACert), cfg: cfg, log: log}
	return a, nil
}

// Start checks cfg and runs the agent on a goroutine of its own, for a
// process that runs it beside a daemon (provisiond serve --agent sim,
// provisiondtest.WithAgent). The returned stop cancels it and returns once
// Run has, and so every goroutine the agent started; it must be called.
func Start(cfg Config) (stop func(), err error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.Run(ctx) // nil once ctx ends
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// Run runs the agent until ctx is done, then stops every worker and
// machine agent and returns once all of their goroutines have. It
// returns nil after ctx ends; Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	a.mu.Lock()
	if a.ctx != nil {
		a.mu.Unlock()
		cancel()
		return errors.New("agent: Run called twice")
	}
	a.ctx = ctx
	a.mu.Unlock()
	defer func() {
		cancel()
		a.mu.Lock()
		a.stopped = true
		a.mu.Unlock()
		a.wg.Wait()
	}()
	a.log.Info("agent starting", "addresses", a.cfg.Addrs)
	a.supervise(ctx, a.log.With("worker", "models"), a.followModels)
	a.log.Info("agent stopped")
	return nil
}

// supervise runs fn until ctx ends or fn returns errStopped. When fn
// fails it waits (backoff from MinBackoff, doubling up to MaxBackoff,
// with jitter) and runs it again; fn calls connected once it has logged
// in, which resets the backoff.
func (a *Agent) supervise(ctx context.Context, log *slog.Logger, fn func(ctx context.Context, connected func()) error) {
	wait := a.cfg.MinBackoff
	for {
		err := fn(ctx, func() { wait = a.cfg.MinBackoff })
		if ctx.Err() != nil || errors.Is(err, errStopped) {
			return
		}
		d := wait/2 + rand.N(wait/2+1)
		log.Warn("connection lost; trying again", "err", err, "in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, a.cfg.MaxBackoff)
	}
}

// goWorker starts fn on a goroutine the agent owns, under a child of
// parent; it returns nil once the agent is stopping.
func (a *Agent) goWorker(parent context.Context, fn func(ctx context.Context)) *worker {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped || parent.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(parent)
	w := &worker{cancel: cancel, done: make(chan struct{})}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer close(w.done)
		defer cancel()
		fn(ctx)
	}()
	return w
}

// followModels logs in as the admin user, which may see every model, and
// keeps one provisioner running per model: the environ provisioner of an
// IAAS model, the unit provisioner of a CAAS one. (Juju's controller reads
// its models from its own database; provisiond serves them through
// ModelAdmin.WatchModels.)
func (a *Agent) followModels(ctx context.Context, connected func()) error {
	creds := a.cfg.Credentials
	user := creds.AdminUser
	if user == "" {
		user = "admin"
	}
	c, err := a.d.loginUser(ctx, "", user, creds.AdminPassword)
	if err != nil {
		return err
	}
	defer c.Close()
	connected()
	const method = "WatchModels"
	from := a.modelsFrom
	wr, rev, resumed, err := watchFrom[params.StringsWatchResult](ctx, c, a.log, modelAdminFacade, modelAdminVersion, method, nil, from)
	if err == nil && wr.Error != nil {
		err = wr.Error
	}
	if err != nil {
		return fmt.Errorf("watching models: %w", err)
	}
	if !resumed {
		from = 0
	}
	a.observe(Event{Kind: EventWatched, Watch: method, IDs: wr.Changes, Revision: rev, From: from, Initial: true})
	w := client.NewStringsWatcher(c, wr.StringsWatcherId)
	// Resumed with nothing changed, the provisioners running are the
	// models': no need to list them again.
	sync := !resumed || len(wr.Changes) > 0
	for {
		if sync {
			if err := a.syncModels(ctx, c); err != nil {
				return err
			}
		}
		a.modelsFrom, sync = rev, true
		var ids []string
		if ids, rev, err = w.NextRevision(ctx); err != nil {
			return err
		}
		a.observe(Event{Kind: EventWatched, Watch: method, IDs: ids, Revision: rev})
	}
}

// syncModels starts the provisioner of each model that has none and stops
// those of models that are gone.
func (a *Agent) syncModels(ctx context.Context, c *client.Conn) error {
	res, err := admin[params.ListModelsResult](ctx, c, "ListModels", nil)
	if err != nil {
		return fmt.Errorf("listing models: %w", err)
	}
	live := map[string]bool{}
	for _, m := range res.Models {
		live[m.UUID] = true
		a.mu.Lock()
		_, running := a.models[m.UUID]
		a.mu.Unlock()
		if running {
			continue
		}
		log := a.log.With("model", m.Name, "uuid", m.UUID)
		var run func(ctx context.Context)
		switch m.Type {
		case "caas":
			p := &unitProvisioner{a: a, model: m.UUID, log: log}
			run = func(ctx context.Context) { a.supervise(ctx, log, p.run) }
		default:
			p := &environProvisioner{a: a, model: m.UUID, log: log}
			run = func(ctx context.Context) { a.supervise(ctx, log, p.run) }
		}
		log.Info("following model", "type", m.Type)
		if w := a.goWorker(a.ctx, run); w != nil {
			a.mu.Lock()
			a.models[m.UUID] = w
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	var gone []*worker
	var goneUUIDs []string
	for uuid, w := range a.models {
		if !live[uuid] {
			gone = append(gone, w)
			goneUUIDs = append(goneUUIDs, uuid)
			delete(a.models, uuid)
		}
	}
	a.mu.Unlock()
	for i, w := range gone {
		a.log.Info("model removed; its provisioner stops", "uuid", goneUUIDs[i])
		w.stop()
		a.stopMachineAgents(goneUUIDs[i])
	}
	return nil
}

// Models returns the UUIDs of the models the agent currently provisions
// (for tests).
func (a *Agent) Models() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.models))
	for uuid := range a.models {
		out = append(out, uuid)
	}
	return out
}
