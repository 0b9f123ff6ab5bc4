package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Compact compacts etcd's history up to rev: etcd forgets every version of
// every key older than rev (the whole cluster's, not only this prefix's).
// A process whose feed has not yet applied rev then reloads and resets its
// feed (Feed.Reset). Compacting to a revision already compacted is not an
// error; one beyond the store's own applied revision is refused, so a
// caller never compacts what this process has not yet seen.
func (s *Store) Compact(ctx context.Context, rev uint64) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if applied := uint64(s.applied.Load()); rev > applied {
		return fmt.Errorf("etcdstore: compaction to revision %d beyond the applied %d refused", rev, applied)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	_, err := s.cli.Compact(ctx, int64(rev))
	if err != nil && !errors.Is(err, rpctypes.ErrCompacted) && !errors.Is(err, rpctypes.ErrGRPCCompacted) {
		return unavailable(fmt.Errorf("compacting to revision %d: %w", rev, err))
	}
	s.noteCompacted(int64(rev)) // or compacted already, further
	return nil
}
