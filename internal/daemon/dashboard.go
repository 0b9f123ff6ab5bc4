package daemon

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/provisiond/provisiond/facades/admin"
	"github.com/provisiond/provisiond/facades/modeladmin"
	"github.com/provisiond/provisiond/internal/dashboard"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// The status page (internal/dashboard) is served at /dashboard/ on the API
// port. It reads the daemon's own state and hub, so in etcd mode every
// daemon serves the same page; its figures come from the daemon's
// metrics, its cluster view from the live API servers' records, their
// presence records, this daemon's /health check and its store's members.

// serveDashboard mounts the dashboard on mux; d.http must exist (its
// Shutdown closes the dashboard's streams, which it would otherwise wait
// for).
func (d *Daemon) serveDashboard(mux *http.ServeMux) error {
	dash, err := dashboard.New(dashboard.Config{
		State: d.state,
		Hub:   d.hub,
		Status: func(ctx context.Context, m state.Model) (params.ModelStatus, error) {
			return modeladmin.StatusOf(ctx, d.state, d.presence, m)
		},
		Pools: func(ctx context.Context, m state.Model) ([]params.StoragePoolInfo, error) {
			return modeladmin.StoragePoolsOf(ctx, d.state, m)
		},
		History: func(ctx context.Context, args params.HistoryArgs) (params.HistoryResult, error) {
			res, err := modeladmin.HistoryOf(ctx, d.state, args)
			if err == nil {
				// The oldest kept, from the daemon's figures (refreshed
				// every few seconds), as ModelAdmin.History says it.
				if st, serr := d.historyStats(ctx); serr == nil && st.Oldest > 0 {
					res.OldestRevision, res.OldestTime = st.Oldest, st.OldestTime.UTC().Format(time.RFC3339Nano)
				}
			}
			return res, err
		},
		OnPresence:   d.presence.OnChange,
		Counters:     d.dashboardCounters,
		ServerID:     d.serverID,
		StoreEngine:  d.state.Store().Info().Engine,
		Health:       d.health.check,
		StoreMembers: d.storeMembers(),
		Throttle:     dashboardThrottle{d.throttle},
		Logger:       d.log,
		WriteTimeout: d.cfg.WriteTimeout,
	})
	if err != nil {
		return err
	}
	d.dash = dash
	mux.Handle(dashboard.Prefix, dash.Handler())
	d.http.RegisterOnShutdown(dash.Close)
	return nil
}

// storeMembers returns what reads the etcd members for the dashboard's
// cluster view; nil on bbolt.
func (d *Daemon) storeMembers() func() []dashboard.StoreMember {
	es, ok := d.state.Store().(*etcdstore.Store)
	if !ok {
		return nil
	}
	return func() []dashboard.StoreMember {
		var out []dashboard.StoreMember
		for _, m := range es.Members() {
			out = append(out, dashboard.StoreMember{Endpoint: m.Endpoint, Up: m.Up, Err: m.Err,
				DBSize: m.DBSize, DBQuota: m.DBQuota, Alarms: m.Alarms})
		}
		return out
	}
}

// dashboardThrottle puts the dashboard's logins through the daemon's
// failed-login throttle, as the API's user logins and /backup's basic auth
// (path "dashboard" in its metrics).
type dashboardThrottle struct{ t *admin.Throttle }

func (a dashboardThrottle) Begin(user, remote string) (dashboard.LoginAttempt, time.Duration) {
	attempt, wait := a.t.Begin(a.t.UserKeys("dashboard", user, remote))
	return attempt, wait
}

// agentCounter registers provisiond_agent_connections and returns what
// facade.Deps.Agents calls.
func (d *Daemon) agentCounter() func(delta int) {
	d.agents = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "provisiond_agent_connections", Help: "API connections logged in as machine agents.",
	})
	d.metrics.reg.MustRegister(d.agents)
	return func(delta int) { d.agents.Add(float64(delta)) }
}

// dashboardCounters reads the totals the dashboard's chart is drawn from
// out of the daemon's metrics (not through Gather, which would run the Go
// and process collectors each second too).
func (d *Daemon) dashboardCounters() dashboard.Counters {
	var c dashboard.Counters
	c.Requests = sumCounters(d.metrics.requests)
	c.Logins = sumCounters(d.metrics.logins)
	var pb dto.Metric
	if d.agents != nil && d.agents.Write(&pb) == nil {
		c.Agents = pb.GetGauge().GetValue()
	}
	pb.Reset()
	if d.metrics.commits.Write(&pb) == nil {
		c.CommitSeconds = pb.GetHistogram().GetSampleSum()
		c.Commits = float64(pb.GetHistogram().GetSampleCount())
	}
	return c
}

// sumCounters adds up every series of a counter vector.
func sumCounters(c prometheus.Collector) float64 {
	ch := make(chan prometheus.Metric, 256)
	go func() { // joined: it closes ch when Collect returns
		c.Collect(ch)
		close(ch)
	}()
	var sum float64
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) == nil {
			sum += pb.GetCounter().GetValue()
		}
	}
	return sum
}
