package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
)

// Balancing the agents between the daemons that share a store (etcd).
// An agent stays with the daemon it reached until its connection ends,
// and a stopped daemon's agents go to the others: after a rolling restart
// the daemon restarted last serves nobody and the first ones hold the
// most, up to the per-process file limit at 100,000 agents. So each
// daemon publishes how many API connections it holds, and whether it is
// draining, in a record under its lease (state.APIServerLoad), and reads
// the others'. Every balanceInterval it works out the fair share (the
// connections of the daemons not draining, over their number). When it
// holds more than its share by more than the margin (balanceMargin) and a
// daemon not draining holds less than its share, and while --rebalance is
// on, it:
//
//  1. refuses new API connections with HTTP 503 (rpc.Config.Admit): an
//     agent dials the addresses it knows, one more every 200 ms (Juju's
//     dialAPI), and keeps the first that connects, so it lands where there
//     is room;
//  2. closes a few of its logged-in connections with 1001 (rpc.Server.Shed),
//     at most a balanceRate share of them per interval (balanceMinShed at
//     least) and never more than it holds over its share or the others lack, as a drain closes them: each agent
//     reconnects, to a daemon with room.
//
// Should the connections shed not arrive (the daemons with room do not
// fill, their addresses unreachable from the agents though their records
// live), it stops after balanceStall intervals without progress, warns,
// and tries again balanceBackoff later: a shed agent is never sent into a
// black hole for long. A daemon alone, or on bbolt, publishes nothing and
// never refuses.

// balanceInterval is how often a daemon publishes its load and decides.
const balanceInterval = time.Second

// balanceRate is the most of its connections a daemon over its share
// sheds per interval: 0.5%, so that the reconnections it causes stay a
// small share of what the daemons with room can admit (a reconnection
// costs a handshake and a login on both sides).
const balanceRate = 0.005

// balanceMinShed is the least a daemon over its share sheds per interval
// (within what it holds over its share).
const balanceMinShed = 16

// balanceMargin is how far over its share a daemon may be before it
// sheds: a tenth of the share, and at least balanceMinMargin connections,
// so that a controller of a few agents never moves them.
const (
	balanceMargin    = 0.1
	balanceMinMargin = 32
)

// balanceStall is how many intervals of shedding without the daemons
// with room filling stop the shedding for balanceBackoff.
const (
	balanceStall   = 10
	balanceBackoff = time.Minute
)

// balanceWriteTimeout bounds one publish of the load.
const balanceWriteTimeout = 10 * time.Second

// balancePlan is what one daemon does in one interval.
type balancePlan struct {
	share, margin int
	// refuse is true when this daemon should refuse new connections; shed
	// is how many of its connections it should close.
	refuse bool
	shed   int
	// room is what the daemons under their share lack, together.
	room int
}

// planBalance decides for the daemon self, holding own, given every
// daemon's published load (self's own record, if there, is replaced by
// own).
func planBalance(self string, own state.APIServerLoad, loads []state.APIServerLoad) balancePlan {
	var p balancePlan
	if own.Draining {
		return p
	}
	total, n := own.Conns, 1
	for _, l := range loads {
		if l.Server != self && !l.Draining {
			total += l.Conns
			n++
		}
	}
	if n < 2 {
		return p
	}
	p.share = (total + n - 1) / n
	p.margin = max(balanceMinMargin, int(float64(p.share)*balanceMargin))
	for _, l := range loads {
		if l.Server != self && !l.Draining && l.Conns < p.share {
			p.room += p.share - l.Conns
		}
	}
	if own.Conns <= p.share+p.margin || p.room == 0 {
		return p
	}
	p.refuse = true
	p.shed = min(own.Conns-p.share, p.room, max(balanceMinShed, int(float64(own.Conns)*balanceRate)))
	return p
}

// balancer is one daemon's: what it decided last, for Admit.
type balancer struct {
	refusing atomic.Bool
	share    atomic.Int64
	refused  prometheus.Counter
	shed     prometheus.Counter
}

// admit is rpc.Config.Admit: it refuses while the balancer says so.
func (d *Daemon) admit() error {
	if d.balance == nil || !d.balance.refusing.Load() {
		return nil
	}
	d.balance.refused.Inc()
	return fmt.Errorf("this API server holds more than its share (%d) of the controller's connections: try another", d.balance.share.Load())
}

// newBalancer registers the balancer's metrics.
func (d *Daemon) newBalancer() *balancer {
	b := &balancer{
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "provisiond_rebalance_refused_total",
			Help: "API connections refused (HTTP 503) because this daemon held more than its share of the controller's while another had room (--rebalance).",
		}),
		shed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "provisiond_rebalance_shed_total",
			Help: "API connections this daemon closed (1001) to hand their agents to a daemon with room (--rebalance).",
		}),
	}
	d.metrics.reg.MustRegister(b.refused, b.shed)
	return b
}

// balanceLoop publishes this daemon's load every balanceInterval and acts
// on the plan, until ctx ends (etcd mode). Its record goes with the
// store's lease.
func (d *Daemon) balanceLoop(ctx context.Context) {
	t := time.NewTicker(balanceInterval)
	defer t.Stop()
	defer d.balance.refusing.Store(false)
	var published *state.APIServerLoad
	var stalled, shedding int // intervals shedding without the room shrinking; and shedding at all
	lastRoom := -1
	var pausedUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		own := state.APIServerLoad{Server: d.serverID, Conns: d.rpc.Conns(), Draining: d.draining.Load()}
		if published == nil || *published != own {
			wctx, cancel := context.WithTimeout(ctx, balanceWriteTimeout)
			_, err := d.state.PublishAPIServerLoad(wctx, own)
			cancel()
			switch {
			case err == nil:
				published = &own
			case ctx.Err() != nil || errors.Is(err, store.ErrClosed):
				return
			default:
				d.log.Debug("publishing this API server's load", "err", err)
			}
		}
		loads, err := d.state.APIServerLoads(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return
			}
			d.balance.refusing.Store(false) // decide on nothing stale
			continue
		}
		p := planBalance(d.serverID, own, loads)
		d.balance.share.Store(int64(p.share))
		if !d.rebalance.Load() || time.Now().Before(pausedUntil) {
			p.refuse, p.shed = false, 0
		}
		if p.shed > 0 {
			if lastRoom >= 0 && p.room >= lastRoom {
				stalled++
			} else {
				stalled = 0
			}
			lastRoom = p.room
			if stalled >= balanceStall {
				d.log.Warn("rebalancing: the agents this daemon hands over do not arrive at the daemons with room (can the agents reach their addresses?); pausing",
					"share", p.share, "connections", own.Conns, "room", p.room, "for", balanceBackoff)
				pausedUntil = time.Now().Add(balanceBackoff)
				stalled, lastRoom = 0, -1
				p.refuse, p.shed = false, 0
			}
		} else {
			stalled, lastRoom = 0, -1
		}
		d.balance.refusing.Store(p.refuse)
		if p.shed > 0 {
			if shedding == 0 {
				d.log.Info("rebalancing: handing agents to the daemons with room", "share", p.share, "connections", own.Conns, "room", p.room)
			}
			shedding++
			d.balance.shed.Add(float64(d.rpc.Shed(p.shed)))
		} else if shedding > 0 {
			d.log.Info("rebalanced", "share", p.share, "connections", own.Conns, "intervals", shedding)
			shedding = 0
		}
	}
}
