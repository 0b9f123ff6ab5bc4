package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	jujuerrors "github.com/juju/errors"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/pki"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/watcher"
)

// This file holds what a daemon does as one of the API servers of a
// controller: it registers its addresses while it serves (every daemon,
// bbolt too: the list then holds one), and, on a store several daemons
// share (etcd), it takes the controller's identity from the store, keeps
// its credentials.yaml listing the live daemons, and runs the work that
// must run once per controller under an election.

// newServerID names this daemon process among the live API servers: the
// host name and a random suffix, new at every start (a server's record
// lives as long as its process).
func newServerID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r == '/' || r < ' ' {
			return '-'
		}
		return r
	}, host)
	if host == "" {
		host = "provisiond"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// register records this daemon among the live API servers. A store out
// of space (a full disk under bbolt, etcd's NOSPACE) does not stop the
// start: every commit keeps a history record, so the registration needs
// pages the file may not have even when nothing else at start writes, and
// a daemon that cannot write still serves reads (writes answer the full
// disk's or the quota's code), as it would if the disk filled while it
// ran. It warns, and registers again every registerRetry until it can or
// it stops (the goroutine is d.unregister's to stop).
func (d *Daemon) register(hostPorts []params.HostPort) error {
	s := state.APIServer{
		ID:        d.serverID,
		Addresses: stateHostPorts(hostPorts)[0],
		Version:   ServerVersion,
		Started:   time.Now().UTC().Round(time.Second),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	release, err := d.state.RegisterAPIServer(ctx, s)
	cancel()
	switch {
	case err == nil:
		d.unregister = release
		return nil
	case !outOfSpace(err):
		return fmt.Errorf("record API addresses: %w", err)
	}
	d.log.Warn("cannot register this API server: the store is out of space; serving reads, writes fail until space is freed; registering again every "+registerRetry.String(),
		"server-id", d.serverID, "err", err)
	life, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	var registered func() // set by the goroutine before done closes
	go func() {
		defer close(done)
		t := time.NewTicker(registerRetry)
		defer t.Stop()
		for {
			select {
			case <-life.Done():
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(life, 30*time.Second)
			release, err := d.state.RegisterAPIServer(ctx, s)
			cancel()
			if err == nil {
				registered = release
				d.log.Info("registered this API server", "server-id", d.serverID)
				return
			}
		}
	}()
	var once sync.Once
	d.unregister = func() {
		once.Do(func() {
			stop()
			<-done
			if registered != nil {
				registered()
			}
		})
	}
	return nil
}

// registerRetry is how often a daemon that started with its store out of
// space tries its registration again.
const registerRetry = 5 * time.Second

// outOfSpace reports a write refused for want of space: the disk under
// bbolt full (or its quota reached), or etcd's space quota reached.
func outOfSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, store.ErrNoSpace)
}

// apiHostPorts lists every live API server's addresses in wire form, this
// daemon's first (agents try them in order), for LoginResult.servers.
//
// An agent keeps the list it was given and, when its daemon goes, tries
// only those: a list of this daemon alone strands its agents the moment
// this daemon stops. So a list is never cut short by a moment without
// etcd: when the servers cannot be read (the replica refusing reads while
// etcd does not answer), or none is registered (every lease lost at
// once, the records not yet put again), the last list read is given; and
// this daemon, which is serving, is on it even while its own record is
// gone. (In a rolling restart of 100,000 agents on a saturated box, with
// etcd unanswering for seconds at a time, two agents stayed without a
// daemon for 10 minutes once theirs stopped, as agents given it alone
// would.)
func (d *Daemon) apiHostPorts() [][]params.HostPort {
	self := slices.Clone(d.hostPorts)
	servers, err := d.state.APIServers(context.Background())
	if err != nil || len(servers) == 0 {
		if last := d.lastServers.Load(); last != nil {
			return *last
		}
		return [][]params.HostPort{self}
	}
	out := [][]params.HostPort{self}
	for _, s := range servers {
		if s.ID == d.serverID {
			continue
		}
		hps := make([]params.HostPort, len(s.Addresses))
		for i, hp := range s.Addresses {
			hps[i] = params.HostPort{Value: hp.Value, Type: hp.Type, Scope: hp.Scope, Port: hp.Port}
		}
		out = append(out, hps)
	}
	d.lastServers.Store(&out)
	return out
}

// liveAddresses lists the host:port of every live API server, this
// daemon's first, without repeats: credentials.yaml's api-addresses.
func (d *Daemon) liveAddresses() []string {
	var out []string
	for _, hps := range d.apiHostPorts() {
		for _, hp := range hps {
			a := net.JoinHostPort(hp.Value, strconv.Itoa(hp.Port))
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// initialiseShared is initialise on a store several daemons share: the
// first daemon on an empty store makes the controller and its identity
// (UUIDs, CA and server certificate, admin and controller-agent
// passwords) in one transaction, so two starting at once make one
// controller; the others take the identity from the store. Either way the
// daemon then presents the controller's certificate and writes its own
// credentials.yaml. hosts are the names and addresses the certificate
// made here covers (juju-apiserver and the loopback ones are always in).
func (d *Daemon) initialiseShared(addrs, hosts []string) error {
	// A prefix a migrate or restore is loading (or left half loaded)
	// holds part of a controller: refuse it, before and (a load that
	// began meanwhile puts its mark with the controller record) after
	// finding the controller.
	if err := controllerstore.CheckLoaded(d.state); err != nil {
		return err
	}
	ok, err := d.state.Initialized(context.Background())
	if err != nil {
		return err
	}
	if !ok {
		if err := d.makeSharedController(addrs, hosts); err != nil {
			return err
		}
	}
	id, ok, err := d.state.Identity(context.Background())
	if err != nil {
		return err
	}
	if err := controllerstore.CheckLoaded(d.state); err != nil {
		return err
	}
	if !ok {
		return errors.New("the controller in the store has no identity record: it was not made by a daemon running on a shared store; see docs/scale-out.md, Moving between stores")
	}
	if d.cfg.CertFile == "" {
		if len(id.CAKey) == 0 || len(id.ServerCert) == 0 {
			return errors.New("the controller was made with operator-supplied certificates: give this daemon --cert-file, --key-file and --ca-file too")
		}
		d.tls = &pki.Material{CACertPEM: id.CACert, CAKeyPEM: id.CAKey, CertPEM: id.ServerCert, KeyPEM: id.ServerKey}
	}
	ctrl, err := d.state.Controller(context.Background())
	if err != nil {
		return err
	}
	d.creds = Credentials{
		ControllerUUID:      ctrl.UUID,
		ControllerModelUUID: ctrl.ModelUUID,
		AdminUser:           "admin",
		AdminPassword:       id.AdminPassword,
		ControllerAgent:     ControllerAgent{Tag: "machine-0", Password: id.AgentPassword, Nonce: id.AgentNonce},
		CACert:              string(d.tls.CACertPEM),
		APIAddresses:        addrs,
	}
	if m, err := d.state.ModelByName(context.Background(), state.DefaultModelName); err == nil {
		d.creds.DefaultModelUUID = m.UUID
	}
	if err := d.state.UpdateControllerConfig(context.Background(), map[string]any{"ca-cert": d.creds.CACert}, nil); err != nil {
		return fmt.Errorf("record CA certificate: %w", err)
	}
	return d.writeCredentials()
}

// makeSharedController makes the controller and its identity. Losing the
// race to another daemon doing the same is not an error: its controller
// is the one.
func (d *Daemon) makeSharedController(addrs, hosts []string) error {
	id := state.Identity{
		AdminPassword: randomPassword(),
		AgentPassword: randomPassword(),
		AgentNonce:    "user-admin:bootstrap",
	}
	if d.cfg.CertFile == "" {
		var err error
		if id.CACert, id.CAKey, err = pki.NewCA("provisiond CA", pki.CAValidity); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
		if id.ServerCert, id.ServerKey, err = pki.NewServerCert(id.CACert, id.CAKey, hosts, pki.ServerValidity); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	} else {
		id.CACert = d.tls.CACertPEM
		if len(id.CACert) == 0 {
			id.CACert = d.tls.CertPEM
		}
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	apiPort, _ := strconv.Atoi(port)
	res, err := d.state.Initialize(context.Background(), state.InitArgs{
		AdminPassword:    id.AdminPassword,
		AgentPassword:    id.AgentPassword,
		AgentNonce:       id.AgentNonce,
		Identity:         &id,
		ControllerConfig: map[string]any{"api-port": apiPort},
		ModelConfig:      map[string]any{"agent-version": ServerVersion},
	})
	switch {
	case jujuerrors.Is(err, jujuerrors.AlreadyExists):
		d.log.Info("joined the controller another daemon made at the same time")
		return nil
	case err != nil:
		return fmt.Errorf("initialise the controller in the store: %w", err)
	}
	d.log.Info("initialised the controller in the store", "controller", res.ControllerUUID)
	return nil
}

// writeCredentials writes credentials.yaml unless it already says the same.
func (d *Daemon) writeCredentials() error {
	path := filepath.Join(d.cfg.DataDir, CredentialsFile)
	if old, err := ReadCredentials(path); err == nil && credentialsEqual(old, &d.creds) {
		return nil
	}
	if err := WriteCredentials(path, &d.creds); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	return nil
}

func credentialsEqual(a, b *Credentials) bool { return reflect.DeepEqual(a, b) }

// cluster runs the goroutines of a daemon on a shared store: keeping
// credentials.yaml's api-addresses to the live daemons, and compacting
// etcd under an election. Stopped and waited for by stop.
type cluster struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stop cancels the shared-store goroutines and waits for them, at most
// for wait: an election campaign cut short resigns through etcd's client
// with no deadline of its own (etcd's concurrency package), so with etcd
// unreachable it returns only once the store closes. It reports whether
// they all stopped; if not, the caller closes the state and then calls
// wait.
func (c *cluster) stop(wait time.Duration) bool {
	if c == nil {
		return true
	}
	c.cancel()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// wait waits for the shared-store goroutines (after stop).
func (c *cluster) wait() {
	if c != nil {
		c.wg.Wait()
	}
}

// startCluster starts the shared-store goroutines.
func (d *Daemon) startCluster() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cluster = &cluster{cancel: cancel}
	d.cluster.wg.Add(1)
	go func() {
		defer d.cluster.wg.Done()
		d.followServers(ctx)
	}()
	d.cluster.wg.Go(func() { d.publishPresence(ctx) }) // presence.go
	d.cluster.wg.Go(func() { d.followPresence(ctx) })
	d.cluster.wg.Go(func() { d.balanceLoop(ctx) }) // balance.go
	every, compact := d.cfg.Etcd.CompactionInterval, true
	switch {
	case every == 0:
		every = DefaultCompactionInterval
	case every < 0:
		// etcd compacts by its own --auto-compaction-retention: the
		// history is still archived, every minute, so that what etcd
		// keeps longer than that is archived before it goes.
		every, compact = time.Minute, false
	}
	d.cluster.wg.Add(1)
	go func() {
		defer d.cluster.wg.Done()
		d.compactUnderElection(ctx, every, compact)
	}()
}

// followServers rewrites credentials.yaml's api-addresses whenever the
// set of live API servers changes, so clients reading it (provisionctl)
// find every daemon.
func (d *Daemon) followServers(ctx context.Context) {
	w := watcher.NewNotify()
	w.OnStop(d.hub.Subscribe(watcher.Filter{Kind: state.KindAPIServer}, w.Sink()))
	defer w.Stop()
	w.Trigger() // the servers registered before this daemon subscribed
	for {
		if err := w.Next(ctx); err != nil {
			return
		}
		addrs := d.liveAddresses()
		d.credsMu.Lock()
		changed := !slices.Equal(addrs, d.creds.APIAddresses)
		if changed {
			d.creds.APIAddresses = addrs
		}
		err := error(nil)
		if changed {
			err = d.writeCredentials()
		}
		d.credsMu.Unlock()
		if err != nil {
			d.log.Warn("could not refresh credentials.yaml's api-addresses", "err", err)
		} else if changed {
			d.log.Info("API servers changed", "api-addresses", strings.Join(addrs, ","))
		}
	}
}

// compactor is what etcdstore offers for compaction, and for the
// history's archive.
type compactor interface {
	Compact(ctx context.Context, rev uint64) error
	ArchiveHistory(ctx context.Context) (uint64, error)
}

// compactUnderElection compacts etcd's history every interval while this
// daemon leads the "compactor" election, to the revision it saw one
// interval before: every daemon whose feed lags less than an interval
// follows on; one further behind reloads and wakes its watchers (the
// store's Feed.Reset). Before each compaction it archives the history
// records committed since the last (the store's ArchiveHistory), and it
// never compacts past the newest revision archived, so no record is lost
// to compaction (docs/history.md), unless etcd is out of space: then the
// archive cannot be written, and compaction goes on without it. Without compact it only archives. A
// daemon that loses the election stops; the next leader starts over,
// from the archive's mark.
func (d *Daemon) compactUnderElection(ctx context.Context, every time.Duration, compact bool) {
	st := d.state.Store()
	c, ok := st.(compactor)
	if !ok {
		return
	}
	for ctx.Err() == nil {
		leading, resign, err := st.Elect(ctx, "compactor")
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("compaction election", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(every / 10):
			}
			continue
		}
		d.log.Info("leading etcd compaction and the history's archive", "every", every, "compact", compact)
		t := time.NewTicker(every)
		var prev, done uint64
	lead:
		for {
			select {
			case <-leading.Done():
				break lead
			case <-t.C:
				rev := st.Revision()
				archived, err := c.ArchiveHistory(leading)
				switch {
				case errors.Is(err, store.ErrNoSpace):
					// etcd is out of space and the archive cannot be
					// written: it must not keep compaction from
					// freeing space, so compact as without history.
					// The records up to there not yet archived are
					// lost (the archiver says which when it next
					// writes).
					d.log.Warn("archiving the history: etcd is out of space; compacting without the archive, and the history records not yet archived before the compaction are lost",
						"archived", archived, "compact", prev, "err", err)
					archived = prev
				case err != nil:
					// Not compacted either: the next tick archives
					// and compacts.
					d.log.Warn("archiving the history", "err", err)
					prev = rev
					continue
				}
				// Compaction to r keeps revision r and later: the
				// records after the newest archived stay readable.
				if to := min(prev, archived+1); compact && prev > 0 && to > done {
					if err := c.Compact(leading, to); err != nil {
						d.log.Warn("compacting etcd", "revision", to, "err", err)
					} else {
						done = to
						d.metrics.compactions.Inc()
						d.log.Debug("compacted etcd", "revision", to)
					}
				}
				prev = rev
			}
		}
		t.Stop()
		resign()
	}
}

// watchEtcd exports an etcd store's counters, and the compactions this
// daemon made.
func (m *metrics) watchEtcd(s *etcdstore.Store) {
	m.compactions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "provisiond_store_compactions_total", Help: "Compactions of etcd's history this daemon made while it led the compactor election.",
	})
	m.reg.MustRegister(m.compactions)
	counter := func(name, help string, f func(etcdstore.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(s.Stats())) })
	}
	m.reg.MustRegister(
		counter("provisiond_store_feed_resets_total",
			"Times this daemon's change feed fell behind etcd's compaction: it reloaded and woke every watcher.",
			func(st etcdstore.Stats) uint64 { return st.Resets }),
		counter("provisiond_store_watch_reconnects_total", "Times the etcd watch was started again after its stream ended or failed (a member restarting, a connection cut).",
			func(st etcdstore.Stats) uint64 { return st.Reconnects }),
		counter("provisiond_store_conflicts_total", "Transactions refused by etcd because what they read changed (the write was run again).",
			func(st etcdstore.Stats) uint64 { return st.Conflicts }),
		counter("provisiond_store_contentions_total", "Writes that gave up after too many conflicts (code try again).",
			func(st etcdstore.Stats) uint64 { return st.Contentions }),
		counter("provisiond_store_lease_losses_total", "Times the daemon's etcd lease expired before it was renewed.",
			func(st etcdstore.Stats) uint64 { return st.LeaseLosses }),
		counter("provisiond_store_group_commits_total", "etcd transactions that carried the writes of several calls at once (group commit).",
			func(st etcdstore.Stats) uint64 { return st.Groups }),
		counter("provisiond_store_grouped_writes_total", "Writes sent in group commits.",
			func(st etcdstore.Stats) uint64 { return st.Grouped }),
		counter("provisiond_store_own_applied_total",
			"Commits this daemon applied to its replica as it sent them, being the revision after the latest it had (the others come with the etcd watch).",
			func(st etcdstore.Stats) uint64 { return st.OwnApplied }),
		counter("provisiond_store_member_exclusions_total",
			"Times this daemon moved its etcd client off a member that stopped answering (while another answered).",
			func(st etcdstore.Stats) uint64 { return st.MemberExclusions }),
	)
}

// storeCollector exports the store's figures (store.Inspector), on either
// engine: the size of its data, the part in use and its quota, and, on
// etcd, what the store last learned of each member (labelled by its
// endpoint): whether it answers, and its database's size against etcd's
// space quota (past which etcd refuses every write: alert well before,
// e.g. at 80%).
type storeCollector struct {
	s                                              store.Inspector
	size, inUse, quota                             *prometheus.Desc
	memberUp, memberSize, memberInUse, memberQuota *prometheus.Desc
}

func newStoreCollector(s store.Inspector) *storeCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &storeCollector{
		s:           s,
		size:        desc("provisiond_store_size_bytes", "Space the store's data takes: the bbolt file, or the largest etcd member's database."),
		inUse:       desc("provisiond_store_size_in_use_bytes", "Part of provisiond_store_size_bytes that holds data (the rest is free pages, which bbolt reuses and etcd's defragmentation gives back)."),
		quota:       desc("provisiond_store_quota_bytes", "The size past which the store refuses writes: the smallest etcd member's space quota (none on bbolt)."),
		memberUp:    desc("provisiond_store_etcd_member_up", "1 while the etcd member answers this daemon's probes (its status and a linearizable read, with a leader), else 0.", "endpoint"),
		memberSize:  desc("provisiond_store_etcd_db_size_bytes", "Size of the etcd member's database, as etcd compares it with its space quota.", "endpoint"),
		memberInUse: desc("provisiond_store_etcd_db_size_in_use_bytes", "Part of the etcd member's database that holds data (the rest is free pages a defragment gives back).", "endpoint"),
		memberQuota: desc("provisiond_store_etcd_db_quota_bytes", "The etcd member's space quota (--quota-backend-bytes): past it etcd raises NOSPACE and refuses writes.", "endpoint"),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.inUse, c.quota, c.memberUp, c.memberSize, c.memberInUse, c.memberQuota} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	in, err := c.s.Inspect(context.Background()) // asks nothing of etcd: it does not block
	if err != nil {
		return
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	if in.SizeBytes > 0 {
		gauge(c.size, in.SizeBytes)
	}
	if in.InUseBytes > 0 {
		gauge(c.inUse, in.InUseBytes)
	}
	if in.QuotaBytes > 0 {
		gauge(c.quota, in.QuotaBytes)
	}
	for _, m := range in.Members {
		up := int64(0)
		if m.Up {
			up = 1
		}
		gauge(c.memberUp, up, m.Endpoint)
		if m.At.IsZero() {
			continue // no status answered yet
		}
		gauge(c.memberSize, m.SizeBytes, m.Endpoint)
		gauge(c.memberInUse, m.InUseBytes, m.Endpoint)
		if m.QuotaBytes > 0 {
			gauge(c.memberQuota, m.QuotaBytes, m.Endpoint)
		}
	}
}
