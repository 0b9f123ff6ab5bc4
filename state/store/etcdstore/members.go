package etcdstore

import (
	"context"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The member watch: the store's client spreads its requests over every
// endpoint (gRPC's round robin over one connection per member), and a
// member that stops answering (SIGSTOP, a hung machine or disk, a paused
// VM, a network that drops its packets) keeps its connection: gRPC's
// keepalive closes a connection only after its ping interval, which gRPC
// will not set below 10 s, and its timeout. Until then a third of the
// requests, and the watch and the lease's keepalive if they were on that
// connection, wait for nothing. (etcd's own client no longer checks its
// endpoints' health; Kubernetes' apiserver leaves it to the same
// keepalive.)
//
// So the store watches each member itself, on a connection of its own: a
// goroutine per member asks it for its status (which also gives the
// database's size and quota, for the metrics, and its alarms) and makes a
// linearizable read that requires a leader, both within half of
// RequestTimeout, every quarter of RequestTimeout. A member that does not
// answer both, or answers without a leader, is down; while at least one
// member is up, the store's client is given only the members that are up
// (SetEndpoints), and the connections it had to a member found down are
// closed at once, so the requests, the watch and the lease keepalive on
// them fail now and start again on a member that answers. A member that
// answers again is given back. When no member answers (etcd unreachable)
// the client keeps them all: there is nothing better to move to. So a
// daemon moves off a hung member within about three quarters of
// RequestTimeout of its hanging.

// MemberStatus is what the store last learned of one etcd member.
type MemberStatus struct {
	Endpoint string
	// Up: the member answered its last probe (its status, and a
	// linearizable read, within half of RequestTimeout) and had a leader.
	Up bool
	// Excluded: the store's client is kept off the member (it is down and
	// another member is up).
	Excluded bool
	// Err is why the member is down ("" when up).
	Err string
	// DBSize is the size of the member's database file, DBSizeInUse the
	// part of it that holds data (the rest is free pages a defragment
	// gives back), DBQuota etcd's --quota-backend-bytes: past it etcd
	// raises the NOSPACE alarm and refuses writes. Zero when unknown
	// (the member has not answered a status yet; DBQuota from an etcd
	// before 3.6).
	DBSize, DBSizeInUse, DBQuota int64
	// Alarms are the alarms the member reported ("NOSPACE", "CORRUPT").
	Alarms []string
	// At is when the member last answered a status (zero: never).
	At time.Time
}

// memberWatch is the member watch of a store (see above).
type memberWatch struct {
	s     *Store
	base  clientv3.Config // the store's client's, for each member's own client
	conns *connTracker    // the store's client's connections, by address

	mu       sync.Mutex // guards members and active
	members  []MemberStatus
	active   []string // the endpoints the store's client has now
	excluded int      // members excluded so far (Stats.MemberExclusions)
}

// start starts a goroutine per member, owned by the store (stopped by
// Close through s.ctx, waited for with s.wg).
func (w *memberWatch) start() {
	w.active = slices.Clone(w.s.cfg.Endpoints)
	w.members = make([]MemberStatus, len(w.s.cfg.Endpoints))
	for i, ep := range w.s.cfg.Endpoints {
		w.members[i] = MemberStatus{Endpoint: ep, Up: true}
		w.s.wg.Add(1)
		go w.follow(i)
	}
}

// every and timeout are the probe's interval and bound.
func (w *memberWatch) every() time.Duration {
	return max(w.s.cfg.RequestTimeout/4, 10*time.Millisecond)
}
func (w *memberWatch) timeout() time.Duration {
	return max(w.s.cfg.RequestTimeout/2, 10*time.Millisecond)
}

// follow probes member i every interval until the store closes. With
// one endpoint it uses the store's client (the same member); otherwise a
// client of its own, made (again, if that failed) as it goes.
func (w *memberWatch) follow(i int) {
	defer w.s.wg.Done()
	ep := w.s.cfg.Endpoints[i]
	var cli *clientv3.Client
	if len(w.s.cfg.Endpoints) == 1 {
		cli = w.s.cli
	} else {
		defer func() {
			if cli != nil {
				cli.Close()
			}
		}()
	}
	t := time.NewTicker(w.every())
	defer t.Stop()
	for {
		var st MemberStatus
		if cli == nil {
			cfg := w.base
			cfg.Endpoints = []string{ep}
			cfg.Context = w.s.ctx
			c, err := clientv3.New(cfg)
			if err != nil {
				st = MemberStatus{Endpoint: ep, Err: err.Error()}
			} else {
				cli = c
			}
		}
		if cli != nil {
			st = w.probe(cli, ep)
		}
		w.record(i, st)
		select {
		case <-w.s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe asks one member for its status and makes a linearizable read
// through it that needs a leader.
func (w *memberWatch) probe(cli *clientv3.Client, ep string) MemberStatus {
	st := MemberStatus{Endpoint: ep}
	ctx, cancel := context.WithTimeout(w.s.ctx, w.timeout())
	defer cancel()
	resp, err := etcdserverpb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &etcdserverpb.StatusRequest{})
	if err != nil {
		st.Err = "status: " + err.Error()
		return st
	}
	st.At = time.Now()
	st.DBSize, st.DBSizeInUse, st.DBQuota = resp.DbSize, resp.DbSizeInUse, resp.DbSizeQuota
	for _, e := range resp.Errors {
		// etcd reports its alarms as "memberID:N alarm:NAME".
		if _, alarm, ok := strings.Cut(e, "alarm:"); ok {
			st.Alarms = append(st.Alarms, strings.TrimSpace(alarm))
		}
	}
	if resp.Leader == 0 {
		st.Err = "no leader"
		return st
	}
	if _, err := cli.Get(clientv3.WithRequireLeader(ctx), w.s.feedK, clientv3.WithCountOnly()); err != nil {
		st.Err = "linearizable read: " + err.Error()
		return st
	}
	st.Up = true
	return st
}

// record keeps member i's new status and gives the store's client the
// members that are up (all of them when none is).
func (w *memberWatch) record(i int, st MemberStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.members[i]
	if st.At.IsZero() { // no status answered: keep what was learned last
		st.DBSize, st.DBSizeInUse, st.DBQuota, st.Alarms, st.At = old.DBSize, old.DBSizeInUse, old.DBQuota, old.Alarms, old.At
	}
	w.members[i] = st
	if old.Up != st.Up {
		if st.Up {
			w.s.log.Info("etcd member answers again", "endpoint", st.Endpoint)
		} else {
			w.s.log.Warn("etcd member does not answer", "endpoint", st.Endpoint, "err", st.Err)
		}
	}
	var up []string
	for _, m := range w.members {
		if m.Up {
			up = append(up, m.Endpoint)
		}
	}
	if len(up) == 0 {
		up = w.s.cfg.Endpoints
	}
	if slices.Equal(up, w.active) {
		return
	}
	var cut []string
	for _, ep := range w.active {
		if !slices.Contains(up, ep) {
			cut = append(cut, ep)
		}
	}
	w.active = slices.Clone(up)
	w.s.cli.SetEndpoints(up...)
	for _, ep := range cut {
		n := w.conns.cut(dialAddr(ep))
		w.excluded++
		w.s.log.Warn("moved off an etcd member that does not answer", "endpoint", ep, "connections_closed", n,
			"endpoints", strings.Join(up, ","))
	}
	if len(cut) == 0 {
		w.s.log.Info("etcd members in use", "endpoints", strings.Join(up, ","))
	}
}

// exclusions is how many times a member was excluded.
func (w *memberWatch) exclusions() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return uint64(w.excluded)
}

// status returns what is known of every member.
func (w *memberWatch) status() []MemberStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.members)
	for i := range out {
		out[i].Excluded = !slices.Contains(w.active, out[i].Endpoint)
		out[i].Alarms = slices.Clone(out[i].Alarms)
	}
	return out
}

// Members returns what the store last learned of each etcd member, in
// the order of Config.Endpoints.
func (s *Store) Members() []MemberStatus {
	return s.members.status()
}

// dialAddr is the address gRPC dials for an endpoint: its host and port.
func dialAddr(ep string) string {
	if u, err := url.Parse(ep); err == nil && u.Host != "" {
		return u.Host
	}
	return ep
}

// connTracker dials the store's client's connections and keeps them by
// address, so that the member watch can close those to a member it finds
// down (gRPC offers no way to close one connection of a client).
type connTracker struct {
	mu    sync.Mutex
	conns map[string]map[*trackedConn]struct{}
}

func (c *connTracker) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: nc, addr: addr, t: c}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		c.conns = map[string]map[*trackedConn]struct{}{}
	}
	if c.conns[addr] == nil {
		c.conns[addr] = map[*trackedConn]struct{}{}
	}
	c.conns[addr][tc] = struct{}{}
	return tc, nil
}

// cut closes every connection to addr and says how many there were.
func (c *connTracker) cut(addr string) int {
	c.mu.Lock()
	conns := c.conns[addr]
	delete(c.conns, addr)
	c.mu.Unlock()
	for tc := range conns {
		tc.Conn.Close()
	}
	return len(conns)
}

// trackedConn is a connection that leaves its tracker when closed.
type trackedConn struct {
	net.Conn
	addr string
	t    *connTracker
	once sync.Once
}

func (tc *trackedConn) Close() error {
	tc.once.Do(func() {
		tc.t.mu.Lock()
		delete(tc.t.conns[tc.addr], tc)
		tc.t.mu.Unlock()
	})
	return tc.Conn.Close()
}
