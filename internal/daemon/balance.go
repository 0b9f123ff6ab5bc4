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
// connections of the daemons not draining, over their number) and the
// margin (balanceMargin). While a daemon not draining holds less than its
// share by more than the margin (it has room), --rebalance is on, and the
// daemons' connections together have held steady for a few seconds
// (balanceSteady: not while the fleet connects), a daemon:
//
//  1. at its share or over it, refuses new API connections with HTTP 503
//     (rpc.Config.Admit): an agent dials the addresses it knows, one more
//     every 200 ms (Juju's dialAPI), and keeps the first that connects, so
//     it lands where there is room, and never on a daemon near the margin
//     that would then shed it again;
//  2. over its share by more than the margin, also closes a few of its
//     logged-in connections with 1001 (rpc.Server.Shed), as a drain
//     closes them: at most a balanceRate share of them per interval
//     (balanceMinShed at least), never more than it holds over its share
//     or the others lack. Each agent reconnects, to a daemon with room.
//
// Should the agents it sends on (shed, or refused) not arrive (the
// daemons with room do not fill, their addresses unreachable from the
// agents though their records live), it stops refusing and shedding after
// balanceStall intervals without progress, warns, and tries again
// balanceBackoff later: no agent is sent into a black hole for long. A
// daemon alone never refuses; on bbolt none of this runs.

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

// BalanceMargin is how far past share a daemon holds connections before
// it sheds, and short of it before it has room (--rebalance): a tenth of
// the share, at least balanceMinMargin.
func BalanceMargin(share int) int {
	return max(balanceMinMargin, int(float64(share)*balanceMargin))
}

// balanceStall is how many intervals of shedding without the daemons
// with room filling stop the shedding for balanceBackoff.
const (
	balanceStall   = 10
	balanceBackoff = time.Minute
)

// balanceSteady is how many intervals the connections of every daemon
// together, the draining ones' included, must have held within
// balanceSteadyShare (and balanceMinMargin) before a daemon acts: while
// the fleet is connecting (a start, a storm of every daemon at once) the
// daemons fill at different paces, and shedding then would only add
// reconnections at the busiest moment. A drain, and a rolling restart,
// move agents between daemons and keep that total.
const (
	balanceSteady      = 5
	balanceSteadyShare = 0.02
)

// balanceWriteTimeout bounds one publish of the load.
const balanceWriteTimeout = 10 * time.Second

// balancePlan is what one daemon does in one interval.
type balancePlan struct {
	// total is the connections of the daemons not draining, share what
	// each would hold were they even; all counts the draining ones' too
	// (what holds steady while agents move between daemons).
	total, all, share, margin int
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
	p.all = own.Conns
	for _, l := range loads {
		if l.Server == self {
			continue
		}
		p.all += l.Conns
		if !l.Draining {
			total += l.Conns
			n++
		}
	}
	p.total = total
	if n < 2 {
		return p
	}
	p.share = (total + n - 1) / n
	p.margin = BalanceMargin(p.share)
	for _, l := range loads {
		if l.Server != self && !l.Draining && l.Conns < p.share-p.margin {
			p.room += p.share - l.Conns
		}
	}
	if p.room == 0 {
		return p
	}
	// At its share or over it, a daemon refuses, so that the agents moved
	// land on the daemons with room and not on one a little under the
	// margin, which would then shed them again; it sheds only over the
	// margin.
	p.refuse = own.Conns >= p.share
	if own.Conns > p.share+p.margin {
		p.shed = min(own.Conns-p.share, p.room, max(balanceMinShed, int(float64(own.Conns)*balanceRate)))
	}
	return p
}

// balancer is one daemon's: what it decided last, for Admit.
type balancer struct {
	refusing atomic.Bool
	share    atomic.Int64
	refusals atomic.Int64 // connections refused, for the loop's stall check
	refused  prometheus.Counter
	shed     prometheus.Counter
}

// admit is rpc.Config.Admit: it refuses while the balancer says so.
func (d *Daemon) admit() error {
	if d.balance == nil || !d.balance.refusing.Load() {
		return nil
	}
	d.balance.refusals.Add(1)
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
	var stalled, shedding int // intervals sending agents on without the room shrinking; and shedding at all
	var lastRefusals int64
	lastRoom := -1
	var pausedUntil time.Time
	var totals []int // the last balanceSteady intervals' totals
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
		totals = append(totals, p.all)
		if len(totals) > balanceSteady {
			totals = totals[1:]
		}
		if !d.rebalance.Load() || time.Now().Before(pausedUntil) || !steady(totals) {
			p.refuse, p.shed = false, 0
		}
		refusals := d.balance.refusals.Load()
		refusedSince := refusals - lastRefusals
		lastRefusals = refusals
		// Sending agents on (shedding, or refusing those that came) while
		// the room does not shrink: they do not arrive.
		if p.shed > 0 || (p.refuse && refusedSince > 0) {
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

// steady reports whether the daemons' connections together held within
// balanceSteadyShare of the latest (and balanceMinMargin) over the last
// balanceSteady intervals.
func steady(totals []int) bool {
	if len(totals) < balanceSteady {
		return false
	}
	last := totals[len(totals)-1]
	within := max(balanceMinMargin, int(float64(last)*balanceSteadyShare))
	for _, t := range totals {
		if t < last-within || t > last+within {
			return false
		}
	}
	return true
}
