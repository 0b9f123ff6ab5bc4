package etcdstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/provisiond/provisiond/state/store"
)

// Defaults of Config.
const (
	DefaultPrefix          = "/provisiond/"
	DefaultDialTimeout     = 5 * time.Second
	DefaultRequestTimeout  = 5 * time.Second
	DefaultLeaseTTL        = 10 * time.Second
	DefaultMaxTxnOps       = 128        // etcd's --max-txn-ops default
	DefaultMaxRequestBytes = 1536 << 10 // etcd's --max-request-bytes default
)

// The gRPC flow-control windows of the store's connection to etcd, fixed
// rather than grown by gRPC's estimator. The estimator sends etcd a PING
// for every DATA frame that arrives while none is outstanding: at one
// commit at a time that is a ping (a write here, a read and a write on etcd,
// a read here again) for each Txn reply and for each watch response, for
// nothing, since a window this size is never the limit on loopback or a LAN.
// The windows are credit, not buffers: gRPC holds what arrived only until
// the replica reads it, and the replica reads as fast as it applies.
const (
	streamWindow = 8 << 20
	connWindow   = 16 << 20
)

// Config configures Open. Endpoints and Feed are needed; the rest has
// defaults.
type Config struct {
	// Endpoints are etcd's client URLs (https://host:2379, ...).
	Endpoints []string

	// Prefix is put before every key; it must end in "/". Several
	// controllers may share one etcd under distinct prefixes (neither a
	// prefix of the other). Default DefaultPrefix.
	Prefix string

	// CAFile verifies etcd's certificate; CertFile and KeyFile are the
	// client's, for etcd's --client-cert-auth. Any of them set means TLS.
	CAFile, CertFile, KeyFile string

	// Username and Password log in to etcd's auth, when enabled.
	Username, Password string

	// DialTimeout bounds the first connection.
	DialTimeout time.Duration

	// RequestTimeout bounds every request to etcd, and so how long a call
	// takes to fail with store.ErrUnavailable when etcd cannot answer.
	RequestTimeout time.Duration

	// StaleAfter is how long the local replica may go without word that
	// it is current (a watch response, or a probe of the feed key after
	// StaleAfter/4 of silence) before reads fail with
	// store.ErrUnavailable. Default RequestTimeout.
	StaleAfter time.Duration

	// LeaseTTL is the time to live of the store's lease (Ephemeral keys,
	// elections): how long after this process dies or loses etcd others
	// see its keys go. Rounded up to seconds. Default DefaultLeaseTTL.
	LeaseTTL time.Duration

	// MaxTxnOps and MaxRequestBytes are the limits of the etcd cluster
	// (its --max-txn-ops and --max-request-bytes): a transaction whose
	// compares would exceed MaxTxnOps is guarded by one compare instead;
	// one whose writes would exceed either fails with store.ErrTooLarge
	// without being sent. Defaults: etcd's defaults.
	MaxTxnOps       int
	MaxRequestBytes int

	// CommitsInFlight bounds the etcd transactions of Updates in flight;
	// Updates that find them all busy queue and go together, in one
	// transaction, when one returns (group commit). Default
	// DefaultCommitsInFlight.
	CommitsInFlight int

	// Feed receives the change feed.
	Feed store.Feed

	// Logger logs reconnections, compactions and lease losses; nil
	// discards.
	Logger *slog.Logger

	// ObserveCommit, if set, is told of each etcd transaction that
	// committed writes of Updates: how long it took, from sending it to
	// etcd's answer (a quorum's fsync included, the replica's apply not),
	// and how many Updates' writes it committed (more than one when they
	// went together, as a group). It runs on the committing goroutine and
	// must not block.
	ObserveCommit func(d time.Duration, writes int)
}

// Stats are the store's counters, for /metrics.
type Stats struct {
	Resets      uint64 // the feed fell behind etcd's compaction: reloaded, Feed.Reset called
	Reconnects  uint64 // the watch was started again after its stream ended (a member restarting, a connection cut) or failed
	Conflicts   uint64 // Update commits refused by a compare (the function re-run)
	Contentions uint64 // Updates that gave up with store.ErrContention
	LeaseLosses uint64 // the lease expired before the store could renew it
	Groups      uint64 // etcd transactions that carried several Updates' commits
	Grouped     uint64 // Update commits sent in those
	OwnApplied  uint64 // revisions an Update applied to the replica itself (the watch skipped them)
	// MemberExclusions counts the times the store moved its client off an
	// etcd member that stopped answering (the member watch).
	MemberExclusions uint64
}

// Store is a store.Store on etcd. See the package documentation.
type Store struct {
	cli    *clientv3.Client
	cfg    Config
	prefix string
	feedK  string // prefix + "meta/changes"
	log    *slog.Logger
	id     string // this store's name in elections and loads

	snap atomic.Pointer[snapshot] // the replica's latest snapshot

	// applyMu is held while a revision is applied to the replica: by the
	// watch goroutine, or by the Update whose commit is the revision
	// after the latest applied (applyOwn). It guards work, the tree the
	// published snapshots are copy-on-write clones of, and serialises
	// publish, Feed.Apply, Feed.Reset and the advance of applied.
	applyMu sync.Mutex
	work    *btree.BTreeG[item]
	// delivered is the latest revision the watch itself has delivered
	// (applied by it, or found applied by an Update already): the probe
	// vouches for the watch, not for what Updates applied. Written under
	// applyMu.
	delivered atomic.Int64

	// applied is the latest revision the feed has handed to Feed.Apply
	// (or Reset); waiters wait for it.
	applied atomic.Int64
	waitMu  sync.Mutex
	waiters waitHeap

	heard atomic.Int64 // unix nanos of the watch's last word (event or progress)

	recent recentHistory // the history records of the revisions applied last (recent.go)

	stats struct {
		resets, reconnects, conflicts, contentions, leaseLosses atomic.Uint64
		groups, grouped, ownApplied                             atomic.Uint64
	}

	group committer // group commit of Updates

	members *memberWatch // each etcd member's health, keeping the client on those that answer

	claimed atomic.Int64 // the revision at which ClaimPrefix registered the prefix (0: it did not)
	// compacted is the latest compaction revision this process made or
	// its watch ran into (Inspect).
	compacted atomic.Int64

	syncMu     sync.Mutex // guards the fields below (Sync)
	syncSeq    uint64     // Sync's reads sent so far
	syncCur    *syncRound // the read in flight, if any
	syncErr    error      // the last read's error (nil: it succeeded)
	syncFailed time.Time  // when it ended

	ctx    context.Context // cancelled by Close, after Updates drained
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the store starts

	mu          sync.Mutex // guards closed, inflight's Add, elects, wg's Add after Open
	closed      bool
	closing     chan struct{}   // closed when Close starts
	closeCtx    context.Context // cancelled when Close starts (ends campaigns)
	closeCancel context.CancelFunc
	inflight    sync.WaitGroup
	elects      map[string]chan struct{} // per election name: this process's one campaigner

	leaseMu  sync.Mutex // guards lease, leaseGen, ephems, departed; held while granting (never inside mu)
	departed bool       // Depart was called: no lease is granted again, nothing released or resigned
	lease    clientv3.LeaseID
	leaseGen chan struct{}         // closed when the current lease is lost
	ephems   map[string]*ephemeral // the live ephemeral keys, by key: the latest Ephemeral of each
	// ephPut serialises Ephemeral's puts and releases, so the value a
	// key holds in etcd is that of its latest Ephemeral (taken before
	// leaseMu, never inside it).
	ephPut sync.Mutex

	closeOnce sync.Once
	closeErr  error
}

// snapshot is one revision of the replica: an immutable tree (a
// copy-on-write clone of the working tree, Store.work) and the
// revision it holds.
type snapshot struct {
	tree    *btree.BTreeG[item]
	rev     int64
	feedMod int64 // mod revision of the feed key at rev (0: none)
}

// item is one record of the replica.
type item struct {
	key string // without the prefix
	val []byte // never modified once in a tree
	mod int64
}

func itemLess(a, b item) bool { return a.key < b.key }

// Open connects to etcd, loads the replica of the prefix and starts
// following the watch. ctx bounds the connection and the load.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcdstore: no endpoints")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("etcdstore: prefix %q does not end in /", cfg.Prefix)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = cfg.RequestTimeout
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.MaxTxnOps <= 0 {
		cfg.MaxTxnOps = DefaultMaxTxnOps
	}
	if cfg.MaxTxnOps < 8 {
		return nil, fmt.Errorf("etcdstore: MaxTxnOps %d is below 8", cfg.MaxTxnOps)
	}
	if cfg.CommitsInFlight <= 0 {
		cfg.CommitsInFlight = DefaultCommitsInFlight
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ccfg, err := clientConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The member watch's clients are the store's without its dialer: the
	// dialer keeps the store's client's connections, for the member
	// watch to close (members.go).
	base := ccfg
	base.DialOptions = slices.Clone(ccfg.DialOptions)
	conns := &connTracker{}
	ccfg.DialOptions = append(ccfg.DialOptions, grpc.WithContextDialer(conns.dial))
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("etcdstore: connect to %s: %w", strings.Join(cfg.Endpoints, ","), unavailable(err))
	}
	host, _ := os.Hostname()
	s := &Store{
		cli:     cli,
		cfg:     cfg,
		prefix:  cfg.Prefix,
		feedK:   cfg.Prefix + feedKey,
		log:     cfg.Logger.With("store", "etcd", "prefix", cfg.Prefix),
		id:      fmt.Sprintf("%s/%d/%x", host, os.Getpid(), time.Now().UnixNano()),
		closing: make(chan struct{}),
		ephems:  map[string]*ephemeral{},
		elects:  map[string]chan struct{}{},
	}
	s.members = &memberWatch{s: s, base: base, conns: conns}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.closeCtx, s.closeCancel = context.WithCancel(context.Background())
	snap, err := s.load(ctx)
	if err != nil {
		s.cancel()
		s.closeCancel()
		cli.Close()
		return nil, err
	}
	s.work = snap.tree.Clone() // before readers see snap.tree: Clone writes to it
	s.publish(snap)
	s.recent.reset(snap.rev)
	s.applied.Store(snap.rev)
	s.heard.Store(time.Now().UnixNano())
	s.wg.Add(1)
	go s.follow()
	s.members.start()
	return s, nil
}

// clientConfig is the etcd client configuration of cfg (defaults
// applied): its endpoints, TLS and auth, keepalives of RequestTimeout, and
// the store's gRPC windows and message size. Its context outlives any
// call's: it is the parent of every request the client makes on its own
// (keepalives).
func clientConfig(cfg Config) (clientv3.Config, error) {
	ccfg := clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    cfg.RequestTimeout,
		DialKeepAliveTimeout: cfg.RequestTimeout,
		PermitWithoutStream:  true,
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               zap.NewNop(),
		MaxCallSendMsgSize:   cfg.MaxRequestBytes + 64<<10,
		Context:              context.Background(),
		DialOptions: []grpc.DialOption{
			grpc.WithStaticStreamWindowSize(streamWindow),
			grpc.WithStaticConnWindowSize(connWindow),
		},
	}
	if cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" {
		tc, err := ClientTLS(cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return ccfg, err
		}
		ccfg.TLS = tc
	}
	return ccfg, nil
}

// The store's own keys, under the prefix (kind meta, which functions
// cannot write nor read).
const (
	feedKey     = store.MetaKind + "/changes" // every commit's change set
	electPrefix = store.MetaKind + "/elect/"  // elections (concurrency.Election)
	loadKey     = store.MetaKind + "/load"    // a Load in progress
)

// ClientTLS is the TLS configuration of an etcd client: etcd's CA from
// caFile (none: the system's roots), and the client certificate of
// certFile and keyFile (etcd's --client-cert-auth; both or neither).
// provisionbench's own etcd clients use it as the store does.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcdstore: CA file %s holds no PEM certificate", caFile)
		}
		tc.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("etcdstore: a client certificate needs both a cert file and a key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("etcdstore: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Client returns the store's etcd client (for the daemon's own use of
// etcd, such as its address registration's tests; not for records).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Prefix returns the store's key prefix.
func (s *Store) Prefix() string { return s.prefix }

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Resets:      s.stats.resets.Load(),
		Reconnects:  s.stats.reconnects.Load(),
		Conflicts:   s.stats.conflicts.Load(),
		Contentions: s.stats.contentions.Load(),
		LeaseLosses: s.stats.leaseLosses.Load(),
		Groups:      s.stats.groups.Load(),
		Grouped:     s.stats.grouped.Load(),
		OwnApplied:  s.stats.ownApplied.Load(),

		MemberExclusions: s.members.exclusions(),
	}
}

// Revision implements store.Store.
func (s *Store) Revision() uint64 { return uint64(s.applied.Load()) }

// Info implements store.Store.
func (s *Store) Info() store.Info {
	return store.Info{
		Engine:   "etcd",
		Location: strings.Join(s.cfg.Endpoints, ",") + " " + s.prefix,
		Revision: s.Revision(),
	}
}

// enter admits a call unless the store is closed; leave ends it.
func (s *Store) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.inflight.Add(1)
	return nil
}

func (s *Store) leave() { s.inflight.Done() }

func (s *Store) isClosed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// fresh reports whether the replica is known current: the watch has been
// heard from within StaleAfter.
func (s *Store) fresh() error {
	silent := time.Duration(time.Now().UnixNano() - s.heard.Load())
	if silent > s.cfg.StaleAfter {
		return fmt.Errorf("etcdstore: %w: no word from etcd's watch for %s (the local replica may be stale)",
			store.ErrUnavailable, silent.Round(time.Millisecond))
	}
	return nil
}

// View implements store.Store: fn reads the replica's latest snapshot, in
// memory, without a round trip to etcd.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.fresh(); err != nil {
		return err
	}
	return fn(&reader{snap: s.snap.Load()})
}

// Health implements store.Store: a linearizable read (which needs a
// quorum), no alarm of etcd's (NOSPACE: store.ErrNoSpace; CORRUPT), and a
// current replica.
func (s *Store) Health(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cli.Get(rctx, s.feedK, clientv3.WithCountOnly()); err != nil {
		return s.fail(ctx, "health check", err)
	}
	if err := s.alarms(rctx); err != nil {
		return err
	}
	return s.fresh()
}

// Close implements store.Store: new calls fail with ErrClosed, waits
// end, Updates in progress finish, the lease is revoked (so other
// processes see this one's ephemeral keys and leaderships go at once),
// and every goroutine is stopped.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.closing)
		s.closeCancel()
		s.mu.Unlock()
		s.inflight.Wait()
		s.leaseMu.Lock()
		lease, departed := s.lease, s.departed
		s.leaseMu.Unlock()
		if lease != clientv3.NoLease && !departed { // Depart tried already
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
			if _, err := s.cli.Revoke(ctx, lease); err != nil {
				s.log.Warn("revoking the store's lease at close", "err", err)
			}
			cancel()
		}
		s.cancel()
		s.wg.Wait()
		s.wakeAll()
		if err := s.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			s.closeErr = fmt.Errorf("etcdstore: close: %w", err)
		}
	})
	return s.closeErr
}
