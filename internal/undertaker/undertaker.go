// Package undertaker is the controller's built-in machine undertaker: it
// removes the machines marked for removal, as Juju's
// worker/machineundertaker does through the MachineUndertaker facade.
//
// Juju's sequence: a dead machine's provisioner stops its instance and
// marks the machine for removal; the undertaker releases what the provider
// gave the machine (a container's addresses) and completes the removal.
// Here the provider is the built-in one, whose addresses are state records:
// state.CompleteMachineRemovals releases them and removes the machine and
// everything recorded of it in one transaction that checks the machine is
// still dead and marked; the undertaker then tells the built-in provider
// (environ.Provider.ReleaseAddresses) what was released.
//
// It follows the marks on the watcher hub (one subscription to every
// model's machine changes that carry the removal mark), so a machine goes
// within moments of its mark; it also sweeps every model when it starts,
// every Sweep after, and when the hub is reset (the store's feed fell
// behind) or the controller config changes. With controller config
// machine-undertaker set to "external" it removes nothing, leaving the
// removals to a controller agent running Juju's own undertaker.
//
// It runs as a singular worker (package singular): on one daemon of a
// controller at a time. Should two ever run at once, each removal is one
// transaction that skips a machine already gone, so nothing is released
// twice.
package undertaker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// DefaultSweep is how often the undertaker looks at every model for
// removals it was not told about (a safety net: the hub tells it of each
// mark).
const DefaultSweep = time.Minute

// Config is what New needs.
type Config struct {
	State   *state.State
	Environ *environ.Provider
	Logger  *slog.Logger
	// Sweep is the interval of the full sweeps (0: DefaultSweep).
	Sweep time.Duration
	// OnRemoved, if set, is told of each machine removed (metrics).
	OnRemoved func(model string, r state.MachineRemoval)
}

// Undertaker removes the machines marked for removal. Its Run is a
// singular.Worker's.
type Undertaker struct {
	cfg Config

	mu      sync.Mutex
	pending map[string]map[string]bool // model UUID → machine ids marked since the last pass
	sweep   bool                       // the next pass looks at every model
	wake    chan struct{}              // a pass is due
}

// New returns an undertaker; Run runs it.
func New(cfg Config) *Undertaker {
	if cfg.Sweep <= 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Undertaker{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Run removes machines as they are marked, until ctx ends. It returns an
// error when a pass fails (its caller starts it again, and it sweeps).
func (u *Undertaker) Run(ctx context.Context) error {
	hub := u.cfg.State.Hub()
	// Subscribe first, then sweep: a mark committed in between is in the
	// sweep or reaches the sink, possibly both (removing twice is a no-op).
	defer hub.Subscribe(watcher.Filter{Kind: state.KindMachine, AllModels: true, Fields: []string{state.FieldRemovalMark}}, u.marked)()
	defer hub.Subscribe(watcher.Filter{Kind: state.KindController, ID: state.ControllerID, Fields: []string{state.FieldConfig}},
		func(uint64, watcher.Change) { u.due(true, "", "") })()
	u.due(true, "", "")
	t := time.NewTicker(u.cfg.Sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			u.due(true, "", "")
		case <-u.wake:
			if err := u.pass(ctx); err != nil {
				u.due(true, "", "") // once started again, it sweeps
				return err
			}
		}
	}
}

// marked is the hub's sink of the marks: it must not block.
func (u *Undertaker) marked(_ uint64, c watcher.Change) {
	if c.IsReset() {
		u.due(true, "", "")
		return
	}
	u.due(false, c.Model, c.ID)
}

// due records a machine to look at (or a sweep) and wakes Run.
func (u *Undertaker) due(sweep bool, model, id string) {
	u.mu.Lock()
	if sweep {
		u.sweep = true
	} else {
		if u.pending == nil {
			u.pending = map[string]map[string]bool{}
		}
		if u.pending[model] == nil {
			u.pending[model] = map[string]bool{}
		}
		u.pending[model][id] = true
	}
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// pass removes what is due: the machines marked since the last pass, or
// on a sweep every machine marked.
func (u *Undertaker) pass(ctx context.Context) error {
	u.mu.Lock()
	pending, sweep := u.pending, u.sweep
	u.pending, u.sweep = nil, false
	u.mu.Unlock()

	ctrl, err := u.cfg.State.Controller(ctx)
	if err != nil {
		return err
	}
	if !state.BuiltinMachineUndertaker(ctrl.Config) {
		// An external undertaker's; a config change sweeps.
		for model, ids := range pending {
			for id := range ids {
				u.cfg.Logger.Debug("machine removal left to an external undertaker", "model", model, "machine", id)
			}
		}
		return nil
	}
	byModel := map[string][]string{}
	if sweep {
		if byModel, err = u.cfg.State.AllMachineRemovals(ctx); err != nil {
			return err
		}
	} else {
		for model, ids := range pending {
			for id := range ids {
				byModel[model] = append(byModel[model], id)
			}
		}
	}
	var errs []error
	for model, ids := range byModel {
		state.SortMachineIDs(ids)
		removed, err := u.cfg.State.CompleteMachineRemovals(ctx, model, ids)
		if err != nil {
			errs = append(errs, err)
			u.cfg.Logger.Warn("cannot remove machines marked for removal", "model", model, "machines", ids, "err", err)
			continue
		}
		for _, r := range removed {
			if err := u.cfg.Environ.ReleaseAddresses(r.HostInstanceID, state.EnvironAddresses(r.Released)); err != nil {
				u.cfg.Logger.Warn("cannot release addresses at the provider", "model", model, "machine", r.ID, "err", err)
			}
			u.cfg.Logger.Info("machine removed", "model", model, "machine", r.ID, "addresses-released", len(r.Released))
			if u.cfg.OnRemoved != nil {
				u.cfg.OnRemoved(model, r)
			}
		}
	}
	return errors.Join(errs...)
}
