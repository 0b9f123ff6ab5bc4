// Package embeddedetcd gives provisiondtest an embedded etcd: importing it
// for its side effect,
//
//	import _ "github.com/provisiond/provisiond/provisiondtest/embeddedetcd"
//
// lets provisiondtest.WithStore(provisiondtest.StoreEtcd) start a one-member
// etcd on loopback for each Server (stopped when the Server closes), as a
// database/sql driver is linked in. It lives apart from provisiondtest so
// that tests on bbolt, or on an etcd they run themselves (WithEtcd), do not
// link etcd's server and its dependencies.
package embeddedetcd

import (
	"go.uber.org/zap"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/provisiondtest/internal/etcdhook"
)

func init() {
	etcdhook.Start = func(dir string) (*etcdhook.Cluster, error) {
		c, err := etcdtest.Start(etcdtest.Options{Dir: dir, NoFsync: true, Logger: zap.NewNop()})
		if err != nil {
			return nil, err
		}
		return &etcdhook.Cluster{
			Endpoints: c.Endpoints(),
			MaxTxnOps: etcdtest.MaxTxnOps, MaxRequestBytes: etcdtest.MaxRequestBytes,
			Close: c.Close,
		}, nil
	}
}
