package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// Store engines (Config.Store).
const (
	// StoreBolt is the embedded default: one bbolt file in the data dir,
	// one daemon.
	StoreBolt = "bbolt"
	// StoreEtcd keeps the controller in an etcd cluster that several
	// daemons share (docs/scale-out.md).
	StoreEtcd = "etcd"
)

// EtcdConfig is how a daemon reaches the etcd cluster of a shared
// controller (Config.Store StoreEtcd).
type EtcdConfig struct {
	// Endpoints are etcd's client URLs.
	Endpoints []string
	// Prefix holds the controller's keys (default "/provisiond/").
	Prefix string
	// CAFile, CertFile and KeyFile are etcd's CA and this daemon's client
	// certificate (etcd's --client-cert-auth).
	CAFile, CertFile, KeyFile string
	// Username and Password log in to etcd's auth.
	Username, Password string
	// DialTimeout bounds the first connection (default 5s); RequestTimeout
	// every request (default 5s): how long a call takes to fail with
	// `try again` while etcd cannot answer.
	DialTimeout, RequestTimeout time.Duration
	// LeaseTTL is how long a dead daemon stays listed among the API
	// servers (default etcdstore.DefaultLeaseTTL).
	LeaseTTL time.Duration
	// CompactionInterval is how often the elected daemon compacts etcd's
	// history, keeping at least one interval of it; 0 is the default
	// (DefaultCompactionInterval), negative disables it (an operator who
	// runs etcd's own --auto-compaction).
	CompactionInterval time.Duration
	// MaxTxnOps and MaxRequestBytes are the cluster's --max-txn-ops and
	// --max-request-bytes (defaults: etcd's own).
	MaxTxnOps, MaxRequestBytes int
	// CommitsInFlight bounds the etcd transactions of writes in flight
	// (default etcdstore.DefaultCommitsInFlight); the writes that wait
	// meanwhile go together in the next (group commit).
	CommitsInFlight int
}

// DefaultCompactionInterval is how often the elected daemon compacts etcd.
const DefaultCompactionInterval = 5 * time.Minute

// validateStore checks the store settings.
func (c *Config) validateStore() error {
	switch c.Store {
	case "", StoreBolt:
		if len(c.Etcd.Endpoints) > 0 {
			return errors.New("--etcd-endpoints needs --store etcd")
		}
	case StoreEtcd:
		if len(c.Etcd.Endpoints) == 0 {
			return errors.New("--store etcd needs --etcd-endpoints")
		}
		for _, e := range c.Etcd.Endpoints {
			if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
				return fmt.Errorf("--etcd-endpoints %q: want http:// or https:// URLs", e)
			}
		}
		if p := c.Etcd.Prefix; p != "" && (!strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/")) {
			return fmt.Errorf("--etcd-prefix %q: must start and end with /", p)
		}
		if (c.Etcd.CertFile == "") != (c.Etcd.KeyFile == "") {
			return errors.New("--etcd-cert-file and --etcd-key-file go together")
		}
		if (c.Etcd.Username == "") != (c.Etcd.Password == "") {
			return errors.New("--etcd-username and --etcd-password go together")
		}
		if c.Etcd.DialTimeout < 0 || c.Etcd.RequestTimeout < 0 || c.Etcd.LeaseTTL < 0 {
			return errors.New("durations must not be negative")
		}
		if c.Etcd.CommitsInFlight < 0 {
			return fmt.Errorf("--etcd-commits-in-flight %d: must be at least 1 (0: the default)", c.Etcd.CommitsInFlight)
		}
	default:
		return fmt.Errorf("--store %q: want %s or %s", c.Store, StoreBolt, StoreEtcd)
	}
	return nil
}

// shared reports whether the daemon runs on a store other daemons share.
func (c *Config) shared() bool { return c.Store == StoreEtcd }

// openState opens the configured store, its feed publishing to the
// daemon's hub, and the state in it (Start). On bbolt it keeps the store
// (d.bolt: backup's snapshot); on etcd it exports the store's counters.
// On either it exports the store's figures (storeCollector).
func (d *Daemon) openState() (*state.State, error) {
	feed := state.Feed(d.hub, d.log)
	var s store.Store
	if !d.cfg.shared() {
		b, err := boltstore.Open(filepath.Join(d.cfg.DataDir, DBFile), boltstore.Options{
			Feed:            feed,
			InitialMmapSize: boltstore.MmapSize,
			ObserveCommit:   d.metrics.observeCommit,
			Failed:          d.storeFailed,
		})
		if err != nil {
			return nil, fmt.Errorf("opening state: %w", err)
		}
		d.bolt, s = b, b
	} else {
		e, err := openEtcd(d.cfg.Etcd, feed, d.log, d.metrics.observeCommit)
		if err != nil {
			return nil, fmt.Errorf("opening state: %w", err)
		}
		d.metrics.watchEtcd(e)
		s = e
	}
	if in, ok := s.(store.Inspector); ok {
		d.metrics.reg.MustRegister(newStoreCollector(in))
	}
	return state.Open(s, state.Options{Hub: d.hub, Logger: d.log})
}

// openBoltState opens the state in the bbolt file at path (created if
// missing) for a tool (migrate, restore, reset-password), and returns its
// store too (bbolt's check and snapshot); nothing watches it. A file a
// daemon holds is refused with an error wrapping boltstore.ErrLocked.
func openBoltState(path string, log *slog.Logger) (*state.State, *boltstore.Store, error) {
	s, err := boltstore.Open(path, boltstore.Options{InitialMmapSize: boltstore.MmapSize})
	if err != nil {
		return nil, nil, fmt.Errorf("opening state: %w", err)
	}
	st, err := state.Open(s, state.Options{Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return st, s, nil
}

// OpenReadOnly opens the state in the bbolt file at path read-only, for
// inspection (backup's manifest, restore's check, the crash harness):
// nothing is created or migrated, and a file a daemon holds is refused
// (boltstore.ErrLocked, after boltstore.DefaultLockTimeout).
func OpenReadOnly(path string) (*state.State, error) {
	s, err := boltstore.OpenReadOnly(path, boltstore.Options{InitialMmapSize: boltstore.MmapSize})
	if err != nil {
		return nil, fmt.Errorf("opening state: %w", err)
	}
	return state.OpenReadOnly(s)
}
