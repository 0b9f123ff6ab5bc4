package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/backup"
	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/internal/migrate"
	"github.com/provisiond/provisiond/provisiondtest"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestNestedEtcdPrefixRefused: with a controller served on /outer/, a
// daemon on /outer/inner/ is refused at start, as are migrate and restore
// into a prefix inside it or containing it, each with a message naming
// /outer/; a sibling prefix is not nested and serves. (Before, the inner
// controller started, and the outer's replica and backups held its
// records, its admin password among them.)
func TestNestedEtcdPrefixRefused(t *testing.T) {
	etcd := etcdtest.New(t)
	eps := etcd.Endpoints()
	outer := provisiondtest.Start(t, provisiondtest.WithEtcd(eps, "/outer/"))
	archive := fetchBackup(t, outer)

	_, err := provisiondtest.New(provisiondtest.WithEtcd(eps, "/outer/inner/"))
	if !errors.Is(err, etcdstore.ErrNestedPrefix) || !strings.Contains(err.Error(), "/outer/inner/ is inside /outer/") {
		t.Fatalf("a daemon on /outer/inner/: %v; want it refused as inside /outer/", err)
	}

	bolt := provisiondtest.Start(t)
	if err := bolt.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = migrate.Run(ctx, migrate.Config{
		From: migrate.End{DataDir: bolt.DataDir()},
		To:   migrate.End{Store: daemon.StoreEtcd, Etcd: migrateEtcd(eps, "/outer/migrated/")},
	})
	if !errors.Is(err, etcdstore.ErrNestedPrefix) || !strings.Contains(err.Error(), "is inside /outer/") {
		t.Errorf("migrate into /outer/migrated/: %v; want it refused", err)
	}
	_, err = backup.RestoreToEtcd(ctx, bytes.NewReader(archive), migrateEtcd(eps, "/"), t.TempDir(), false, nil)
	if !errors.Is(err, etcdstore.ErrNestedPrefix) || !strings.Contains(err.Error(), "/ contains /outer/") {
		t.Errorf("restore into /: %v; want it refused", err)
	}

	if _, err := backup.RestoreToEtcd(ctx, bytes.NewReader(archive), migrateEtcd(eps, "/outer-restored/"), t.TempDir(), false, nil); err != nil {
		t.Fatalf("restore into a sibling prefix: %v", err)
	}
	provisiondtest.Start(t, provisiondtest.WithEtcd(eps, "/outer-restored/"))
}
