package controllerstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// DBFile is the name of the bbolt file in the data dir.
const DBFile = "provisiond.db"

// ErrDataDirInUse is returned when a daemon runs on the data dir a tool
// (restore, migrate) would open.
var ErrDataDirInUse = errors.New("data dir is in use by a running daemon")

// Store engines (daemon.Config.Store).
const (
	// StoreBolt is the embedded default: one bbolt file in the data dir,
	// one daemon.
	StoreBolt = "bbolt"
	// StoreEtcd keeps the controller in an etcd cluster that several
	// daemons share (docs/scale-out.md).
	StoreEtcd = "etcd"
)

// EtcdConfig is how a daemon reaches the etcd cluster of a shared
// controller (daemon.Config.Store StoreEtcd).
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

// Validate checks the settings of a store of engine (StoreBolt, "" for
// it, or StoreEtcd) in the words of provisiond's flags.
func Validate(engine string, e EtcdConfig) error {
	switch engine {
	case "", StoreBolt:
		if len(e.Endpoints) > 0 {
			return errors.New("--etcd-endpoints needs --store etcd")
		}
	case StoreEtcd:
		if len(e.Endpoints) == 0 {
			return errors.New("--store etcd needs --etcd-endpoints")
		}
		for _, e := range e.Endpoints {
			if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
				return fmt.Errorf("--etcd-endpoints %q: want http:// or https:// URLs", e)
			}
		}
		if p := e.Prefix; p != "" && (!strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/")) {
			return fmt.Errorf("--etcd-prefix %q: must start and end with /", p)
		}
		if (e.CertFile == "") != (e.KeyFile == "") {
			return errors.New("--etcd-cert-file and --etcd-key-file go together")
		}
		if (e.Username == "") != (e.Password == "") {
			return errors.New("--etcd-username and --etcd-password go together")
		}
		if e.DialTimeout < 0 || e.RequestTimeout < 0 || e.LeaseTTL < 0 {
			return errors.New("durations must not be negative")
		}
		if e.CommitsInFlight < 0 {
			return fmt.Errorf("--etcd-commits-in-flight %d: must be at least 1 (0: the default)", e.CommitsInFlight)
		}
	default:
		return fmt.Errorf("--store %q: want %s or %s", engine, StoreBolt, StoreEtcd)
	}
	return nil
}

// OpenBolt opens the state in the bbolt file at path (created if
// missing) for a tool (migrate, restore, reset-password), and returns its
// store too (bbolt's check and snapshot); nothing watches it. A file a
// daemon holds is refused with an error wrapping boltstore.ErrLocked.
func OpenBolt(path string, log *slog.Logger) (*state.State, *boltstore.Store, error) {
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

// OpenEtcdState opens state on the etcd cluster e (nothing watches it).
func OpenEtcdState(e EtcdConfig, log *slog.Logger) (*state.State, error) {
	s, err := OpenEtcd(e, store.Feed{}, log, nil)
	if err != nil {
		return nil, fmt.Errorf("opening state: %w", err)
	}
	return state.Open(s, state.Options{Logger: log})
}

// OpenEtcd opens an etcd store with the daemon's settings and registers
// its prefix (etcdstore.ClaimPrefix); observe, if not nil, is told of each
// commit (etcdstore.Config.ObserveCommit).
func OpenEtcd(e EtcdConfig, feed store.Feed, log *slog.Logger, observe func(time.Duration, int)) (*etcdstore.Store, error) {
	cfg := e.StoreConfig()
	cfg.Feed, cfg.Logger, cfg.ObserveCommit = feed, log, observe
	// No deadline on the whole open: loading the replica reads the whole
	// model, which grows with it, and several daemons starting at once
	// share etcd; each page of the load is bounded instead (its
	// RequestTimeout, a few tries), so an etcd that answers nothing
	// still ends the open in about half a minute.
	s, err := etcdstore.Open(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(e.Endpoints, ","), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout+cfg.RequestTimeout+5*time.Second)
	defer cancel()
	// A controller's prefix must neither contain nor be inside another's
	// (whose records its replica would load): refused here for serve,
	// migrate and restore alike.
	if err := s.ClaimPrefix(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// StoreConfig is the etcd store's configuration of e (no feed, logger or
// commit observer).
func (e EtcdConfig) StoreConfig() etcdstore.Config {
	dial := e.DialTimeout
	if dial == 0 {
		dial = 5 * time.Second
	}
	return etcdstore.Config{
		Endpoints:       e.Endpoints,
		Prefix:          e.Prefix,
		CAFile:          e.CAFile,
		CertFile:        e.CertFile,
		KeyFile:         e.KeyFile,
		Username:        e.Username,
		Password:        e.Password,
		DialTimeout:     dial,
		RequestTimeout:  e.RequestTimeout,
		LeaseTTL:        e.LeaseTTL,
		MaxTxnOps:       e.MaxTxnOps,
		MaxRequestBytes: e.MaxRequestBytes,
		CommitsInFlight: e.CommitsInFlight,
	}
}

// CheckLoaded refuses an etcd store whose prefix holds an unfinished load
// (a daemon must not serve part of a controller); other stores pass.
func CheckLoaded(st *state.State) error {
	s, ok := st.Store().(*etcdstore.Store)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.CheckLoad(ctx)
}

// PrefixOrDefault is e's prefix, or etcd's default one.
func (e EtcdConfig) PrefixOrDefault() string {
	if e.Prefix == "" {
		return etcdstore.DefaultPrefix
	}
	return e.Prefix
}

// MissingDirs lists dir and those of its parents that do not exist,
// deepest first: what a tool that makes a data dir (restore, migrate)
// removes again when it fails, so that it leaves no half-made data dir.
func MissingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return out
		}
		out = append(out, d)
		if filepath.Dir(d) == d {
			return out
		}
	}
}
