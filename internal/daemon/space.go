package daemon

import (
	"context"
	"log/slog"

	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// ReclaimEtcdSpace gives the etcd cluster e room for writes again after
// its space quota was reached (provisiond reclaim-etcd-space;
// docs/scale-out.md, "etcd's space quota"): it compacts etcd's history to
// the current revision, defragments each member, and disarms the NOSPACE
// alarm if every member's database is then below its quota
// (etcdstore.ReclaimSpace). The daemons may go on serving meanwhile.
func ReclaimEtcdSpace(ctx context.Context, e EtcdConfig, log *slog.Logger) (etcdstore.SpaceReport, error) {
	if err := controllerstore.Validate(StoreEtcd, e); err != nil {
		return etcdstore.SpaceReport{}, err
	}
	return etcdstore.ReclaimSpace(ctx, e.StoreConfig(), log)
}
