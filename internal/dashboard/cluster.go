package dashboard

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// StoreMember is what the daemon's store last learned of one member of
// its etcd cluster (etcdstore.MemberStatus, as the daemon's metrics
// export it).
type StoreMember struct {
	Endpoint string `json:"endpoint"`
	// Up: the member answered its last probe, with a leader; Err says
	// why not.
	Up  bool   `json:"up"`
	Err string `json:"err,omitempty"`
	// DBSize is the size of its database, DBQuota etcd's space quota
	// (0: not known).
	DBSize  int64    `json:"dbSize,omitempty"`
	DBQuota int64    `json:"dbQuota,omitempty"`
	Alarms  []string `json:"alarms,omitempty"`
}

// clusterEvery is how long a cluster view is reused: the streams of every
// page share one read of the servers and one health check per interval.
const clusterEvery = 2 * time.Second

// clusterView is the controller as this daemon sees it: its store, its
// live API servers (daemons) with the agents connected to each, and this
// daemon's health.
type clusterView struct {
	at    time.Time // when it was read
	Store string    `json:"store"` // "bbolt" or "etcd"
	// Revision is the store's revision this daemon has applied.
	Revision uint64 `json:"revision"`
	// Health is "ok" or why this daemon's /health says it is not; ""
	// when the dashboard was given no health check.
	Health  string          `json:"health,omitempty"`
	Servers []clusterServer `json:"servers"`
	Members []StoreMember   `json:"members,omitempty"`
	// Error says why the servers could not be read.
	Error string `json:"error,omitempty"`
}

// clusterServer is one live API server (daemon) of the controller.
type clusterServer struct {
	ID        string    `json:"id"`
	Self      bool      `json:"self,omitempty"` // the daemon serving this page
	Addresses []string  `json:"addresses"`
	Version   string    `json:"version,omitempty"`
	Started   time.Time `json:"started"`
	// Agents are the agents connected to it, by model, as it publishes
	// them (on a shared store); Connections, for the daemon serving the
	// page, its machine agent connections (its metrics).
	Agents      []modelAgents `json:"agents"`
	Connections *float64      `json:"connections,omitempty"`
}

// modelAgents are a model's agents connected to one server.
type modelAgents struct {
	Model       string   `json:"model"` // the model's name
	Machines    []string `json:"machines,omitempty"`
	Provisioner bool     `json:"provisioner,omitempty"`
}

// clusterCache holds the last cluster view for clusterEvery.
type clusterCache struct {
	mu   sync.Mutex
	view clusterView
}

// cluster returns the controller as this daemon sees it, read at most
// once per clusterEvery. The health check may take up to the daemon's
// health timeout (a store that cannot commit); the streams asking
// meanwhile wait for the same answer.
func (d *Dashboard) cluster(ctx context.Context) clusterView {
	c := &d.clusterCache
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if !c.view.at.IsZero() && now.Sub(c.view.at) < clusterEvery {
		return c.view
	}
	v := clusterView{at: now, Store: d.cfg.StoreEngine, Servers: []clusterServer{}}
	if h := d.cfg.Health; h != nil {
		v.Health = "ok"
		if err := h(); err != nil {
			v.Health = err.Error()
		}
	}
	v.Revision = d.cfg.State.Revision()
	if d.cfg.StoreMembers != nil {
		v.Members = d.cfg.StoreMembers()
	}
	if err := d.readServers(ctx, &v); err != nil {
		d.log.Warn("dashboard: reading the API servers failed", "err", err)
		v.Error = "the API servers could not be read (see the daemon's log)"
	}
	c.view = v
	return v
}

// readServers fills v.Servers: the live API servers, this daemon first,
// each with the agents its presence records list.
func (d *Dashboard) readServers(ctx context.Context, v *clusterView) error {
	servers, err := d.cfg.State.APIServers(ctx)
	if err != nil {
		return err
	}
	recs, err := d.cfg.State.PresenceRecords(ctx)
	if err != nil {
		return err
	}
	names := map[string]string{}
	if len(recs) > 0 {
		ms, err := d.cfg.State.Models(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			names[m.UUID] = m.Name
		}
	}
	agents := map[string][]modelAgents{}
	for _, r := range recs {
		if len(r.Machines) == 0 && !r.Provisioner {
			continue
		}
		name := names[r.Model]
		if name == "" {
			name = r.Model // a model removed since
		}
		agents[r.Server] = append(agents[r.Server], modelAgents{Model: name, Machines: slices.Clone(r.Machines), Provisioner: r.Provisioner})
	}
	for _, s := range servers {
		cs := clusterServer{ID: s.ID, Self: s.ID == d.cfg.ServerID, Version: s.Version, Started: s.Started.UTC(),
			Addresses: []string{}, Agents: agents[s.ID]}
		for _, hp := range s.Addresses {
			cs.Addresses = append(cs.Addresses, net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port)))
		}
		if cs.Agents == nil {
			cs.Agents = []modelAgents{}
		}
		slices.SortFunc(cs.Agents, func(a, b modelAgents) int { return strings.Compare(a.Model, b.Model) })
		if cs.Self && d.cfg.Counters != nil {
			n := d.cfg.Counters().Agents
			cs.Connections = &n
		}
		if cs.Self {
			v.Servers = append([]clusterServer{cs}, v.Servers...)
		} else {
			v.Servers = append(v.Servers, cs)
		}
	}
	return nil
}
