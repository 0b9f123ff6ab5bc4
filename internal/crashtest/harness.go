package crashtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/daemonproc"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// Config configures Run. Zero values take the defaults noted.
type Config struct {
	// Binary is the provisiond binary to run (required).
	Binary string
	// DataDir is the daemon's data dir (required); it should be empty.
	DataDir string
	// Cycles is the number of kill/restart cycles (default 50).
	Cycles int
	// Seed seeds every random choice but the scheduler's (default 1).
	Seed uint64
	// The daemon is killed a random delay between MinKill and MaxKill
	// after the writers start (default 20ms and 300ms).
	MinKill, MaxKill time.Duration
	// EarlyKillPercent of the cycles after the first kill the daemon
	// while it starts instead, 0 to 30ms after exec (default 10; -1 for
	// none).
	EarlyKillPercent int
	// AgentWriters is the number of controller agent connections writing
	// machines (default 3); three admin connections write models, config
	// and add machines.
	AgentWriters int
	// CAASWriters is the number of controller agent connections to a
	// CAAS model reporting the pods of an application each (default 2).
	CAASWriters int
	// Env is added to the daemon's environment.
	Env []string
	// SetupEnv, if not nil, is added instead of Env for the first start,
	// which makes through the API what the workload writes to. That start
	// is not under test (no kill); the planted-bug test turns the bug off
	// for it.
	SetupEnv []string
	// Logf, if set, gets a line per cycle.
	Logf func(format string, args ...any)
	// Etcd, if set, runs the daemon on an etcd cluster (--store etcd)
	// instead of bbolt in DataDir, which then holds only its
	// credentials.yaml. The cluster outlives the kills: only the daemon
	// is killed.
	Etcd *Etcd
}

// Etcd is where a Run in etcd mode keeps the controller.
type Etcd struct {
	// Endpoints and Prefix are the daemon's --etcd-endpoints and
	// --etcd-prefix; the prefix should be empty.
	Endpoints []string
	Prefix    string
	// OpenState opens the controller's state in the cluster, for the
	// checks while the daemon is stopped (the caller's, since only
	// internal/daemon and cmd import the store implementations: make
	// depcheck). The harness closes what it returns.
	OpenState func() (*state.State, error)
	// Args are more flags for the daemon (--etcd-max-txn-ops, ...).
	Args []string
	// Settle is called after each kill, before the checks read the
	// controller, and returns once etcd has decided every request the
	// killed daemon sent it: each is applied or never will be (required).
	// A write the daemon had sent when it died is not decided by its
	// death: etcd may apply it after, so a check that read the prefix
	// before it landed would take its absence for the truth and find it
	// present after the restart (the in-flight write is either outcome;
	// its outcome is what etcd holds once it is decided). The caller's,
	// since only internal/etcdtest and the store import etcd.
	Settle func(ctx context.Context) error
}

// Result sums up a run.
type Result struct {
	Cycles     int // cycles completed (verified)
	EarlyKills int // of them, kills while the daemon started
	Acked      int // writes acknowledged (all found after their kill)
	// AckedBy splits Acked by writer: "admin-models", "admin-config",
	// "admin-machines" (AddMachines calls), "agent" (Provisioner calls of
	// the agent writers), "caas" (UpdateApplicationsUnits calls).
	AckedBy  map[string]int
	InFlight int // writes in flight at a kill (either outcome is right)
	// InFlightLanded counts those of them that were on disk after the kill.
	InFlightLanded int
	Refusals       int
	// MachinesAdded counts the machines found after a kill that the
	// workload added (AddMachines); MachinesRemoved those it removed.
	MachinesAdded, MachinesRemoved int
	Revision                       uint64 // on disk after the last cycle
	Elapsed                        time.Duration
}

// harness is the state of one Run.
type harness struct {
	cfg     Config
	creds   *daemon.Credentials
	regs    []*register
	writers []*writer
	adder   *writer
	seq     atomic.Uint64
	res     Result
	rng     *rand.Rand
	// caasModel is the UUID of the CAAS model ("crash-k8s").
	caasModel string
	// machines are the ids of the controller model's top-level machines
	// that are no register's (the controller's own): with the registers'
	// machines, every machine there may be.
	machines []string
	// spare are machines the adder added that no agent writer has taken
	// yet; fresh is the channel that hands them over during a cycle.
	spare []*register
	fresh chan *register
}

func (h *harness) dbPath() string { return filepath.Join(h.cfg.DataDir, daemon.DBFile) }

// openState opens the stopped daemon's state: the bbolt file read-only,
// or the etcd prefix.
func (h *harness) openState() (*state.State, error) {
	if e := h.cfg.Etcd; e != nil {
		return e.OpenState()
	}
	return controllerstore.OpenReadOnly(h.dbPath())
}

// start runs the daemon with env.
func (h *harness) start(env []string) (*daemonproc.Process, error) {
	var args []string
	if e := h.cfg.Etcd; e != nil {
		args = append([]string{"--store", "etcd", "--etcd-endpoints", strings.Join(e.Endpoints, ","),
			"--etcd-prefix", e.Prefix}, e.Args...)
	}
	return daemonproc.Start(h.cfg.Binary, h.cfg.DataDir, env, args...)
}

func (h *harness) logf(format string, args ...any) {
	if h.cfg.Logf != nil {
		h.cfg.Logf(format, args...)
	}
}

func (h *harness) clientConfig(addr, model string) client.Config {
	return client.Config{Addr: addr, ModelUUID: model, CACert: []byte(h.creds.CACert), DialTimeout: 10 * time.Second}
}

// dial connects and logs in: as the admin user on the default model, or
// as the controller agent on model (the controller model if "").
func (h *harness) dial(ctx context.Context, addr string, admin bool, model string) (*client.Conn, error) {
	switch {
	case admin:
		model = h.creds.DefaultModelUUID
	case model == "":
		model = h.creds.ControllerModelUUID
	}
	c, err := client.Dial(ctx, h.clientConfig(addr, model))
	if err != nil {
		return nil, err
	}
	if admin {
		_, err = c.LoginUser(ctx, h.creds.AdminUser, h.creds.AdminPassword)
	} else {
		a := h.creds.ControllerAgent
		_, err = c.LoginAgent(ctx, a.Tag, a.Password, a.Nonce)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Run runs the harness. It returns a *Violation when the daemon loses an
// acknowledged write or is otherwise inconsistent after a kill, and
// another error when the harness cannot do its job. The daemon is not
// running when Run returns.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Binary == "" || cfg.DataDir == "" {
		return Result{}, errors.New("crashtest: Binary and DataDir are required")
	}
	if e := cfg.Etcd; e != nil && (len(e.Endpoints) == 0 || e.OpenState == nil || e.Settle == nil) {
		return Result{}, errors.New("crashtest: Etcd needs Endpoints, OpenState and Settle")
	}
	if cfg.Cycles <= 0 {
		cfg.Cycles = 50
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.MinKill <= 0 {
		cfg.MinKill = 20 * time.Millisecond
	}
	if cfg.MaxKill < cfg.MinKill {
		cfg.MaxKill = max(cfg.MinKill, 300*time.Millisecond)
	}
	if cfg.EarlyKillPercent == 0 {
		cfg.EarlyKillPercent = 10
	}
	if cfg.AgentWriters <= 0 {
		cfg.AgentWriters = 3
	}
	if cfg.CAASWriters <= 0 {
		cfg.CAASWriters = 2
	}
	h := &harness{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0)), res: Result{AckedBy: map[string]int{}}}
	start := time.Now()
	err := h.run(ctx)
	h.res.Elapsed = time.Since(start)
	return h.res, err
}

func (h *harness) run(ctx context.Context) error {
	if err := h.setup(ctx); err != nil {
		return err
	}
	var refusals []string
	for cycle := 1; cycle <= h.cfg.Cycles; cycle++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := h.cycle(ctx, cycle)
		refusals = append(refusals, r...)
		if err != nil {
			return err
		}
		h.res.Cycles = cycle
	}
	if h.res.Refusals = len(refusals); len(refusals) > 0 {
		return &Violation{Cycle: h.res.Cycles, Kind: ViolationRefused,
			Detail: fmt.Sprintf("%d writes refused, first: %s", len(refusals), refusals[0])}
	}
	return nil
}

// setup starts the daemon once on the empty data dir (it initialises it),
// makes through the API what the workload writes to (provisioned machines
// with agent passwords, a CAAS model and its applications), stops it, and
// reads the registers' first values.
func (h *harness) setup(ctx context.Context) error {
	env := h.cfg.Env
	if h.cfg.SetupEnv != nil {
		env = h.cfg.SetupEnv
	}
	p, err := h.start(env)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	addr, err := p.WaitServing(sctx)
	if err == nil {
		if h.creds, err = daemon.ReadCredentials(filepath.Join(h.cfg.DataDir, daemon.CredentialsFile)); err == nil {
			err = h.populate(sctx, addr)
		}
	}
	if err != nil {
		_ = p.Kill()
		return fmt.Errorf("setup: %w; daemon log:\n%s", err, p.LogTail())
	}
	if err := p.Stop(); err != nil {
		_ = p.Kill()
		return err
	}
	st, err := h.openState()
	if err != nil {
		return err
	}
	defer st.Close()
	for _, w := range h.writers {
		for _, r := range w.regs {
			if r.kind != regPassword {
				if r.truth, err = h.observe(st, r); err != nil {
					return err
				}
			}
			h.regs = append(h.regs, r)
		}
	}
	ms, err := st.Machines(ctx, h.creds.ControllerModelUUID)
	if err != nil {
		return err
	}
	known := h.machineRegs()
	for _, m := range ms {
		if !known[m.ID] {
			h.machines = append(h.machines, m.ID)
		}
	}
	return nil
}

// populate makes the writers and, through the API, what they write to.
func (h *harness) populate(ctx context.Context, addr string) error {
	admin, err := h.dial(ctx, addr, true, "")
	if err != nil {
		return err
	}
	defer admin.Close()
	ctrl, err := h.dial(ctx, addr, false, "")
	if err != nil {
		return err
	}
	defer ctrl.Close()

	h.writers = []*writer{{name: "admin-models", admin: true}, {name: "admin-config", admin: true}}
	for slot := range 8 {
		h.writers[0].regs = append(h.writers[0].regs, &register{kind: regModel, name: "crash-m" + strconv.Itoa(slot)})
	}
	for slot := range 16 {
		h.writers[1].regs = append(h.writers[1].regs, &register{kind: regConfig, name: "crash-c" + strconv.Itoa(slot)})
	}
	h.adder = &writer{name: "admin-machines", admin: true, adder: true}
	h.writers = append(h.writers, h.adder)

	// Two provisioned machines per agent writer, whose agents can log in.
	var added params.AddMachinesResult
	if err := admin.Call(ctx, "ModelAdmin", 1, "", "AddMachines", params.AddMachinesArgs{
		Model: state.ControllerModelName, Base: "ubuntu@22.04", Count: 2 * h.cfg.AgentWriters}, &added); err != nil {
		return err
	}
	for i := range h.cfg.AgentWriters {
		w := &writer{name: "agent-" + strconv.Itoa(i)}
		for _, id := range added.Machines[2*i : 2*i+2] {
			tag, pw := machineTag(id), "crash-agent-password-initial-"+id
			if err := bulk(ctx, ctrl, "SetInstanceInfo", params.InstancesInfo{Machines: []params.InstanceInfo{{
				Tag: tag, InstanceId: instanceID(id), Nonce: nonceOf(id)}}}); err != nil {
				return err
			}
			if err := bulk(ctx, ctrl, "SetPasswords", params.EntityPasswords{Changes: []params.EntityPassword{{Tag: tag, Password: pw}}}); err != nil {
				return err
			}
			w.regs = append(w.regs,
				&register{kind: regStatus, name: id},
				&register{kind: regInstanceStatus, name: id},
				&register{kind: regPassword, name: id, truth: pw})
		}
		h.writers = append(h.writers, w)
	}

	// A CAAS model with an application per CAAS writer.
	var sum params.ModelSummary
	if err := admin.Call(ctx, "ModelAdmin", 1, "", "AddModel", params.AddModelArgs{Name: "crash-k8s", Type: "caas"}, &sum); err != nil {
		return err
	}
	h.caasModel = sum.UUID
	for i := range h.cfg.CAASWriters {
		app := "crash-app" + strconv.Itoa(i)
		var res params.ApplicationStatus
		if err := admin.Call(ctx, "ModelAdmin", 1, "", "Deploy", params.DeployArgs{
			Model: "crash-k8s", Application: app, CharmMetadata: "name: " + app + "\nsummary: crash test\n"}, &res); err != nil {
			return err
		}
		h.writers = append(h.writers, &writer{name: "caas-" + strconv.Itoa(i), model: h.caasModel,
			regs: []*register{{kind: regUnits, name: app}}})
	}
	return nil
}

// machineRegs are the ids of the machines registers name.
func (h *harness) machineRegs() map[string]bool {
	known := map[string]bool{}
	for _, r := range h.regs {
		switch r.kind {
		case regStatus, regInstanceStatus, regPassword, regLife:
			known[r.name] = true
		}
	}
	return known
}

// prepare runs while the daemon is stopped: it returns the revision on
// disk and the controller model's top-level machine ids.
func (h *harness) prepare() (uint64, []string, error) {
	st, err := h.openState()
	if err != nil {
		return 0, nil, err
	}
	defer st.Close()
	ms, err := st.Machines(context.Background(), h.creds.ControllerModelUUID)
	if err != nil {
		return 0, nil, err
	}
	var ids []string
	for _, m := range ms {
		if !m.IsContainer() {
			ids = append(ids, m.ID)
		}
	}
	return st.Revision(), ids, nil
}

// cycle is one start, (write,) kill and check. It returns the refusals
// seen.
func (h *harness) cycle(ctx context.Context, cycle int) (refusals []string, err error) {
	t0 := time.Now()
	baseline, machines, err := h.prepare()
	if err != nil {
		return nil, err
	}
	p, err := h.start(h.cfg.Env)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !p.Exited() {
			_ = p.Kill()
		}
		var v *Violation
		if errors.As(err, &v) {
			v.Log = p.LogTail()
		}
	}()

	if cycle > 1 && h.rng.IntN(100) < h.cfg.EarlyKillPercent {
		time.Sleep(time.Duration(h.rng.IntN(30_000)) * time.Microsecond)
		if err := p.Kill(); err != nil {
			return nil, err
		}
		if err := h.verify(ctx, cycle, baseline, 0, 0, 0); err != nil {
			return nil, err
		}
		h.res.EarlyKills++
		h.logf("cycle %d: killed while starting; revision %d; %s", cycle, h.res.Revision, time.Since(t0).Round(time.Millisecond))
		return nil, nil
	}

	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	addr, err := p.WaitServing(sctx)
	cancel()
	if err != nil {
		return nil, err
	}
	if err := h.agentsSeeModel(ctx, cycle, addr, machines); err != nil {
		return nil, err
	}

	// Write until the kill.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	// The adder hands its machines to the agent writers through fresh.
	h.fresh = make(chan *register, max(len(h.spare), 4))
	for _, r := range h.spare {
		h.fresh <- r
	}
	h.spare = nil
	var sc scraper
	var wg sync.WaitGroup
	// The kill comes a random delay after every writer has logged in (or
	// failed to): a login writes nothing, and a user's login costs an
	// argon2id hash (tens of ms), which would leave the admin writers
	// nothing of the window. Bounded, in case a login hangs.
	var logins sync.WaitGroup
	logins.Add(len(h.writers))
	ends := make([]writerEnd, len(h.writers))
	for i, w := range h.writers {
		rng := rand.New(rand.NewPCG(h.cfg.Seed, uint64(cycle)<<8|uint64(i)))
		wg.Go(func() { ends[i] = w.run(wctx, h, addr, rng, logins.Done) })
	}
	wg.Go(func() { sc.run(wctx, addr, []byte(h.creds.CACert)) })
	loggedIn := make(chan struct{})
	go func() { logins.Wait(); close(loggedIn) }()
	select {
	case <-loggedIn:
	case <-time.After(30 * time.Second):
	}
	delay := h.cfg.MinKill + time.Duration(h.rng.Int64N(int64(h.cfg.MaxKill-h.cfg.MinKill)+1))
	time.Sleep(delay)
	killed := time.Now()
	if err := p.Kill(); err != nil {
		return nil, err
	}
	stop()
	wg.Wait()
	for len(h.fresh) > 0 {
		h.spare = append(h.spare, <-h.fresh)
	}
	h.spare = append(h.spare, h.adder.held...)
	h.regs = append(h.regs, h.adder.added...)
	h.res.MachinesAdded += len(h.adder.added)
	h.adder.held, h.adder.added = nil, nil

	acked := 0
	for i, e := range ends {
		acked += e.acked
		h.res.AckedBy[strings.TrimRight(h.writers[i].name, "-0123456789")] += e.acked
		refusals = append(refusals, e.refusals...)
		if e.err != nil && e.at.Before(killed) {
			return refusals, fmt.Errorf("cycle %d: writer stopped before the kill: %w; daemon log:\n%s", cycle, e.err, p.LogTail())
		}
	}
	if err := h.verify(ctx, cycle, baseline, acked, sc.min.Load(), sc.max.Load()); err != nil {
		return refusals, err
	}
	h.res.Acked += acked
	h.logf("cycle %d: killed %s after the writers logged in; %d writes acknowledged; revision %d; %s",
		cycle, delay.Round(time.Millisecond), acked, h.res.Revision, time.Since(t0).Round(time.Millisecond))
	return refusals, nil
}

// Summary is a one-line description of r.
func (r Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d cycles (%d killed while starting) in %s", r.Cycles, r.EarlyKills, r.Elapsed.Round(time.Millisecond))
	if r.Cycles > 0 {
		fmt.Fprintf(&b, " (%s per cycle)", (r.Elapsed / time.Duration(r.Cycles)).Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "; %d writes acknowledged (", r.Acked)
	for i, k := range slices.Sorted(maps.Keys(r.AckedBy)) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, r.AckedBy[k])
	}
	fmt.Fprintf(&b, "), %d in flight at a kill (%d of them landed); %d machines added and %d removed through the API; revision %d",
		r.InFlight, r.InFlightLanded, r.MachinesAdded, r.MachinesRemoved, r.Revision)
	return b.String()
}
