package daemon

import (
	"fmt"
	"path/filepath"

	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// The store settings are internal/controllerstore's; these name them as
// the daemon's Config does (Config.Store, Config.Etcd).
const (
	StoreBolt = controllerstore.StoreBolt
	StoreEtcd = controllerstore.StoreEtcd
	// DefaultCompactionInterval is how often the elected daemon compacts
	// etcd.
	DefaultCompactionInterval = controllerstore.DefaultCompactionInterval
)

// EtcdConfig is how a daemon reaches the etcd cluster of a shared
// controller (Config.Store StoreEtcd).
type EtcdConfig = controllerstore.EtcdConfig

// validateStore checks the store settings.
func (c *Config) validateStore() error { return controllerstore.Validate(c.Store, c.Etcd) }

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
		e, err := controllerstore.OpenEtcd(d.cfg.Etcd, feed, d.log, d.metrics.observeCommit)
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
