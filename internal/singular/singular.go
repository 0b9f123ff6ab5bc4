// Package singular runs the controller's singular workers: work that must
// run on exactly one daemon of a controller at a time (Juju runs such
// workers under its "singular" lease), such as the machine undertaker.
//
// A Runner campaigns in one election of the store (store.Store.Elect; on
// bbolt the only daemon leads at once, on etcd one daemon leads and the
// others wait their turn). While it leads it runs every worker, each on its
// own goroutine, under a context that ends when the leadership does (its
// lease lost: the daemon cut off from etcd or dead) or the runner stops. A
// worker that returns while the leadership lasts is started again after a
// backoff. When the leadership ends the runner waits for every worker to
// return, resigns and campaigns again; another daemon's runner, campaigning
// meanwhile, takes over. So a daemon that dies hands the work over within
// its lease.
//
// Leading is not exclusive in time: a leader cut off from etcd may go on
// briefly after its lease expired while the next one starts. Workers must
// therefore do what must hold inside store transactions (a removal checks
// in its transaction that it is still due), so that two doing the same
// work is safe.
//
// # Goroutines
//
// Start starts the campaign goroutine and Stop ends it: it cancels the
// campaign and the workers' context and waits for them. The workers'
// goroutines are the campaign's, started and waited for by it.
package singular

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Worker is one piece of singular work.
type Worker struct {
	// Name names it in logs.
	Name string
	// Run does the work until ctx ends, and then returns. A Run that
	// returns while ctx lasts (an error, or nil) is started again after a
	// backoff.
	Run func(ctx context.Context) error
}

// Elector is what the runner campaigns through: store.Store's Elect.
type Elector interface {
	Elect(ctx context.Context, name string) (leading context.Context, resign func(), err error)
}

// Backoff bounds: a failed campaign or worker waits MinBackoff, doubling
// up to MaxBackoff, before it tries again.
const (
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 30 * time.Second
)

// Runner runs workers while it leads its election.
type Runner struct {
	e       Elector
	name    string
	log     *slog.Logger
	workers []Worker
	onLead  func(bool)

	leading atomic.Bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// Config is what Start needs.
type Config struct {
	// Elector and Election are the store and the name of the election
	// (one per runner: its workers run together).
	Elector  Elector
	Election string
	Logger   *slog.Logger
	Workers  []Worker
	// OnLead, if set, is told when the runner starts (true) and stops
	// (false) leading, on the campaign goroutine.
	OnLead func(leading bool)
}

// Start starts campaigning.
func Start(cfg Config) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{e: cfg.Elector, name: cfg.Election, log: cfg.Logger, workers: cfg.Workers, onLead: cfg.OnLead,
		cancel: cancel, done: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	go func() {
		defer close(r.done)
		r.campaign(ctx)
	}()
	return r
}

// Leading reports whether the runner leads (its workers run) now.
func (r *Runner) Leading() bool { return r.leading.Load() }

// Cancel ends the campaign and the workers without waiting (Stop waits).
func (r *Runner) Cancel() { r.cancel() }

// Stop ends the campaign and the workers and waits, at most wait (0: no
// bound), for them to return. It reports whether they did: a campaign
// against an unreachable etcd returns only when the store closes, so the
// caller closes it and then calls Wait.
func (r *Runner) Stop(wait time.Duration) bool {
	r.cancel()
	if wait <= 0 {
		<-r.done
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.done:
		return true
	case <-t.C:
		return false
	}
}

// Wait waits for the campaign goroutine to return (after Stop).
func (r *Runner) Wait() { <-r.done }

// campaign leads, runs the workers, and campaigns again, until ctx ends.
func (r *Runner) campaign(ctx context.Context) {
	backoff := MinBackoff
	for ctx.Err() == nil {
		leading, resign, err := r.e.Elect(ctx, r.name)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("campaigning for the controller's singular workers", "election", r.name, "err", err, "retry-in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, MaxBackoff)
			continue
		}
		backoff = MinBackoff
		r.lead(ctx, leading)
		resign()
		if ctx.Err() == nil {
			r.log.Info("no longer leading the controller's singular workers", "election", r.name)
		}
	}
}

// lead runs every worker until the leadership or ctx ends, and waits for
// them.
func (r *Runner) lead(ctx, leading context.Context) {
	wctx, cancel := context.WithCancel(leading)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	r.leading.Store(true)
	if r.onLead != nil {
		r.onLead(true)
	}
	r.log.Info("leading the controller's singular workers", "election", r.name, "workers", len(r.workers))
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() { r.run(wctx, w) })
	}
	wg.Wait()
	r.leading.Store(false)
	if r.onLead != nil {
		r.onLead(false)
	}
}

// run runs w until ctx ends, starting it again after a backoff whenever it
// returns before.
func (r *Runner) run(ctx context.Context, w Worker) {
	backoff := MinBackoff
	for {
		started := time.Now()
		err := w.Run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) > MaxBackoff {
			backoff = MinBackoff // it ran a good while: not a crash loop
		}
		r.log.Warn("singular worker stopped; starting it again", "worker", w.Name, "err", err, "retry-in", backoff)
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
