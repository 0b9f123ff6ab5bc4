package crashtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"provisiond/internal/daemon"
	"provisiond/rpc/client"
	"provisiond/state"
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
	// machines (default 3); two admin connections write models and config.
	AgentWriters int
	// Env is added to the daemon's environment.
	Env []string
	// Logf, if set, gets a line per cycle.
	Logf func(format string, args ...any)
}

// Result sums up a run.
type Result struct {
	Cycles     int // cycles completed (verified)
	EarlyKills int // of them, kills while the daemon started
	Acked      int // writes acknowledged (all found after their kill)
	InFlight   int // writes in flight at a kill (either outcome is right)
	// InFlightLanded counts those of them that were on disk after the kill.
	InFlightLanded int
	Refusals       int
	Revision       uint64 // on disk after the last cycle
	Elapsed        time.Duration
}

// harness is the state of one Run.
type harness struct {
	cfg     Config
	creds   *daemon.Credentials
	regs    []*register
	writers []*writer
	seq     atomic.Uint64
	res     Result
	rng     *rand.Rand
}

func (h *harness) dbPath() string { return filepath.Join(h.cfg.DataDir, daemon.DBFile) }

func (h *harness) logf(format string, args ...any) {
	if h.cfg.Logf != nil {
		h.cfg.Logf(format, args...)
	}
}

func (h *harness) clientConfig(addr, model string) client.Config {
	return client.Config{Addr: addr, ModelUUID: model, CACert: []byte(h.creds.CACert), DialTimeout: 10 * time.Second}
}

// dial connects and logs in: as the admin user on the default model, or
// as the controller agent on the controller model.
func (h *harness) dial(ctx context.Context, addr string, admin bool) (*client.Conn, error) {
	model := h.creds.ControllerModelUUID
	if admin {
		model = h.creds.DefaultModelUUID
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
	h := &harness{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0))}
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
// stops it, and adds the machines and registers of the workload offline.
func (h *harness) setup(ctx context.Context) error {
	p, err := startProcess(h.cfg.Binary, h.cfg.DataDir, h.cfg.Env)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := p.waitServing(sctx); err != nil {
		_ = p.kill()
		return err
	}
	if err := p.stop(); err != nil {
		_ = p.kill()
		return err
	}
	if h.creds, err = daemon.ReadCredentials(filepath.Join(h.cfg.DataDir, daemon.CredentialsFile)); err != nil {
		return err
	}

	admin := []*writer{{name: "admin-models", admin: true}, {name: "admin-config", admin: true}}
	for slot := range 8 {
		admin[0].regs = append(admin[0].regs, &register{kind: regModel, name: "crash-m" + strconv.Itoa(slot)})
	}
	for slot := range 16 {
		admin[1].regs = append(admin[1].regs, &register{kind: regConfig, name: "crash-c" + strconv.Itoa(slot)})
	}
	h.writers = admin
	st, err := state.Open(state.Options{Path: h.dbPath()})
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range h.cfg.AgentWriters {
		w := &writer{name: "agent-" + strconv.Itoa(i)}
		for range 2 {
			// A provisioned machine whose agent can log in.
			id, err := addMachine(st, h.creds.ControllerModelUUID, true)
			if err != nil {
				return err
			}
			pw := "crash-agent-password-initial-" + id
			if err := st.SetMachinePassword(h.creds.ControllerModelUUID, id, pw); err != nil {
				return err
			}
			w.regs = append(w.regs,
				&register{kind: regStatus, name: id},
				&register{kind: regInstanceStatus, name: id},
				&register{kind: regPassword, name: id, truth: pw})
		}
		h.writers = append(h.writers, w)
	}
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
	return nil
}

// addMachine adds a top-level machine, provisioned or not, and returns
// its id.
func addMachine(st *state.State, model string, provisioned bool) (string, error) {
	m, err := st.AddMachine(model, state.MachineParams{Base: state.Base{Name: "ubuntu", Channel: "22.04"}})
	if err != nil || !provisioned {
		return m.ID, err
	}
	return m.ID, st.SetInstanceInfo(model, m.ID, state.InstanceInfo{InstanceID: instanceID(m.ID), Nonce: nonceOf(m.ID)})
}

// prepare runs while the daemon is stopped: it gives every agent writer
// two machines to take through their life, and returns the revision on
// disk and the controller model's top-level machine ids.
func (h *harness) prepare() (uint64, []string, error) {
	st, err := state.Open(state.Options{Path: h.dbPath()})
	if err != nil {
		return 0, nil, err
	}
	defer st.Close()
	for _, w := range h.writers {
		if w.admin {
			continue
		}
		n := 0
		for _, r := range w.regs {
			if r.kind == regLife {
				n++
			}
		}
		for ; n < 2; n++ {
			id, err := addMachine(st, h.creds.ControllerModelUUID, false)
			if err != nil {
				return 0, nil, err
			}
			r := &register{kind: regLife, name: id, truth: lifeUnprovisioned}
			w.regs = append(w.regs, r)
			h.regs = append(h.regs, r)
		}
	}
	ms, err := st.Machines(h.creds.ControllerModelUUID)
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
	p, err := startProcess(h.cfg.Binary, h.cfg.DataDir, h.cfg.Env)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !p.exited() {
			_ = p.kill()
		}
		var v *Violation
		if errors.As(err, &v) {
			v.Log = p.logTail()
		}
	}()

	if cycle > 1 && h.rng.IntN(100) < h.cfg.EarlyKillPercent {
		time.Sleep(time.Duration(h.rng.IntN(30_000)) * time.Microsecond)
		if err := p.kill(); err != nil {
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
	addr, err := p.waitServing(sctx)
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
	var sc scraper
	var wg sync.WaitGroup
	ends := make([]writerEnd, len(h.writers))
	for i, w := range h.writers {
		rng := rand.New(rand.NewPCG(h.cfg.Seed, uint64(cycle)<<8|uint64(i)))
		wg.Go(func() { ends[i] = w.run(wctx, h, addr, rng) })
	}
	wg.Go(func() { sc.run(wctx, addr, []byte(h.creds.CACert)) })
	delay := h.cfg.MinKill + time.Duration(h.rng.Int64N(int64(h.cfg.MaxKill-h.cfg.MinKill)+1))
	time.Sleep(delay)
	killed := time.Now()
	if err := p.kill(); err != nil {
		return nil, err
	}
	stop()
	wg.Wait()

	acked := 0
	for _, e := range ends {
		acked += e.acked
		refusals = append(refusals, e.refusals...)
		if e.err != nil && e.at.Before(killed) {
			return refusals, fmt.Errorf("cycle %d: writer stopped before the kill: %w; daemon log:\n%s", cycle, e.err, p.logTail())
		}
	}
	if err := h.verify(ctx, cycle, baseline, acked, sc.min.Load(), sc.max.Load()); err != nil {
		return refusals, err
	}
	h.res.Acked += acked
	h.logf("cycle %d: killed %s after the writers started; %d writes acknowledged; revision %d; %s",
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
	fmt.Fprintf(&b, "; %d writes acknowledged, %d in flight at a kill (%d of them landed); revision %d",
		r.Acked, r.InFlight, r.InFlightLanded, r.Revision)
	return b.String()
}
