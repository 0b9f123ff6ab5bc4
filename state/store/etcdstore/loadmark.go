package etcdstore

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrLoadPending is returned by CheckLoad for a prefix that holds the
// mark of a Load that has not finished: a load in progress, or one that
// was interrupted (its process killed) and left part of a controller.
var ErrLoadPending = errors.New("the etcd prefix holds an unfinished load")

// CheckLoad fails with ErrLoadPending when the prefix holds the mark of a
// Load that has not finished (its first batch puts the mark, its last
// removes it). A daemon refuses to serve such a prefix: what it holds is
// part of a controller. It reads from a quorum, not the replica.
func (s *Store) CheckLoad(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	resp, err := s.cli.Get(rctx, s.prefix+loadKey, clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return s.fail(ctx, "checking for an unfinished load", err)
	}
	if resp.Count > 0 {
		return fmt.Errorf("%w (its mark %s%s is there): a provisiond migrate or restore into it was interrupted or is still running; "+
			"when none is running, remove the prefix (etcdctl del --prefix %s) and run it again", ErrLoadPending, s.prefix, loadKey, s.prefix)
	}
	return nil
}

// AbortLoad removes every key under the prefix if the prefix holds this
// store's own load mark: it undoes a Load of this store that failed part
// way, and the prefix's registration if this store made it (ClaimPrefix).
// A prefix without the mark, or with another store's, is left alone (it
// reports whether it removed anything).
func (s *Store) AbortLoad(ctx context.Context) (bool, error) {
	if err := s.enter(); err != nil {
		return false, err
	}
	defer s.leave()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	resp, err := s.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.Value(s.prefix+loadKey), "=", s.id)).
		Then(append([]clientv3.Op{clientv3.OpDelete(s.prefix, clientv3.WithPrefix())}, s.releaseClaim()...)...).
		Commit()
	cancel()
	if err != nil {
		return false, s.fail(ctx, "undoing a failed load", err)
	}
	return resp.Succeeded, nil
}

// KeyCount counts every key under the prefix (the store's own and
// ephemeral ones too), from a quorum: a load's target must have none.
func (s *Store) KeyCount(ctx context.Context) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	resp, err := s.cli.Get(rctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return 0, s.fail(ctx, "counting the prefix's keys", err)
	}
	return resp.Count, nil
}
