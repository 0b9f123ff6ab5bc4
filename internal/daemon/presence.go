package daemon

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// Agent presence (internal/presence): every daemon records the agents
// logged in to it (facade.Session) in its Recorder, which status, the
// dashboard and the metrics read. On bbolt that is all there is: one
// daemon, and presence is who is connected to it now (a restart empties
// it, as it closes every connection). On a shared store (etcd) each daemon
// also publishes its agents, one record per model under its lease
// (state.PublishPresence), rewritten at most every presenceInterval, and
// follows the other daemons' records into its Recorder: an agent's
// disconnect reaches the other daemons within about presenceInterval, and
// a killed daemon's agents go down when its lease expires
// (--etcd-lease-ttl). A login adds no write: the records are rewritten
// from memory, coalesced, off the login's path.

// presenceInterval is the least time between two publishes of this
// daemon's agents (etcd mode).
const presenceInterval = time.Second

// presenceWriteTimeout bounds one publish.
const presenceWriteTimeout = 30 * time.Second

// startPresence makes the daemon's Recorder, registers its metrics and
// subscribes it to machine and model removals (it forgets when their
// agents went). Publishing and following on a shared store are the
// cluster's goroutines (startCluster).
func (d *Daemon) startPresence() *presence.Recorder {
	pr := presence.New(nil, d.cfg.shared())
	d.presence = pr
	removed := []string{watcher.FieldRemoved}
	d.hub.Subscribe(watcher.Filter{Kind: state.KindMachine, Fields: removed, AllModels: true}, func(_ uint64, c watcher.Change) {
		if c.Has(watcher.FieldRemoved) {
			pr.Forget(c.Model, c.ID)
		}
	})
	d.hub.Subscribe(watcher.Filter{Kind: state.KindModel, Fields: removed, AllModels: true}, func(_ uint64, c watcher.Change) {
		if c.Has(watcher.FieldRemoved) {
			pr.ForgetModel(c.Model)
		}
	})
	agents := func(kind string, f func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "provisiond_agents_connected",
			Help:        "Agents connected to any API server of the controller, counted once each: machine agents (kind=machine), and models whose provisioner agent, the controller agent at the model's endpoint, is connected (kind=provisioner).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(f()) })
	}
	d.metrics.reg.MustRegister(
		agents("machine", func() int { m, _ := pr.Counts(); return m }),
		agents("provisioner", func() int { _, p := pr.Counts(); return p }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "provisiond_models_without_provisioner",
			Help: "Models whose provisioner agent (the controller agent at the model's endpoint) is not connected to any API server of the controller.",
		}, func() float64 { return d.modelsWithoutProvisioner() }),
	)
	return pr
}

// modelsWithoutProvisioner counts the models whose provisioner agent is
// down (NaN when the models cannot be read).
func (d *Daemon) modelsWithoutProvisioner() float64 {
	if d.state == nil {
		return math.NaN()
	}
	models, err := d.state.Models(context.Background())
	if err != nil {
		d.log.Debug("metrics: reading the models", "err", err)
		return math.NaN()
	}
	n := 0
	for _, m := range models {
		if !d.presence.Provisioner(m.UUID).Alive {
			n++
		}
	}
	return float64(n)
}

// publishPresence writes this daemon's agents of each model whose agents
// changed, at most every presenceInterval, until ctx ends (etcd mode). A
// model left without agents has its record released; the store's Close
// (its lease revoked) removes the others.
func (d *Daemon) publishPresence(ctx context.Context) {
	held := map[string]func(){} // model → release of its record
	t := time.NewTimer(0)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.presence.Changed():
		}
		if wait := presenceInterval - time.Since(last); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		last = time.Now()
		for _, e := range d.presence.Take() {
			if len(e.Machines) == 0 && !e.Provisioner {
				if release := held[e.Model]; release != nil {
					release()
					delete(held, e.Model)
				}
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, presenceWriteTimeout)
			release, err := d.state.PublishPresence(wctx, state.PresenceRecord{
				Server: d.serverID, Model: e.Model, Machines: e.Machines, Provisioner: e.Provisioner,
			})
			cancel()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
					return // stopping: the store closes, or has departed
				}
				d.log.Warn("publishing agent presence; retrying", "model", e.Model, "err", err)
				d.presence.MarkChanged(e.Model)
				continue
			}
			held[e.Model] = release // the earlier one's hold was taken over
		}
	}
}

// followPresence feeds the other daemons' presence records to the
// Recorder whenever one changes (or the feed was reset), until ctx ends
// (etcd mode).
func (d *Daemon) followPresence(ctx context.Context) {
	w := watcher.NewNotify()
	w.OnStop(d.hub.Subscribe(watcher.Filter{Kind: state.KindPresence}, w.Sink()))
	defer w.Stop()
	w.Trigger() // the records published before this daemon subscribed
	for {
		if err := w.Next(ctx); err != nil {
			return
		}
		recs, err := d.state.PresenceRecords(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return // stopping, as publishPresence
			}
			d.log.Warn("reading the agent presence records; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(presenceInterval):
			}
			w.Trigger()
			continue
		}
		entries := make([]presence.Entry, 0, len(recs))
		for _, r := range recs {
			if r.Server != d.serverID {
				entries = append(entries, presence.Entry{Model: r.Model, Machines: r.Machines, Provisioner: r.Provisioner})
			}
		}
		d.presence.SetRemote(entries)
	}
}
