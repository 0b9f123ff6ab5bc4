package etcdtest

import (
	"context"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// client is a client of every member (TLS when the cluster has it).
func (c *Processes) client() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()}
	if t := c.opts.TLS; t != nil {
		tc, err := transport.TLSInfo{CertFile: t.ClientCert, KeyFile: t.ClientKey, TrustedCAFile: t.CAFile}.ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}

// Compact compacts etcd's history up to its current revision, as an
// operator's (or provisiond's compactor's) compaction does, and returns
// that revision. It needs a quorum.
func (c *Processes) Compact(ctx context.Context) (int64, error) {
	cli, err := c.client()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "\x00compact-probe")
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	return rev, nil
}
