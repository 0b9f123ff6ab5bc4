package etcdstore

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
)

// The history of commits (store.Historian) on etcd: each commit's history
// record travels in its change set on the feed key (a version-3 value,
// changes.go), in the commit's own etcd transaction, so etcd's own history
// of the feed key is the history of commits, in revision order, for as
// long as etcd keeps it: up to the revision the daemons' compactor last
// compacted to, which the compactor keeps behind the history's retention.
// Reading it is a watch of the feed key from a revision, which etcd serves
// from its store by revision range.

var _ store.Historian = (*Store)(nil)

// History implements store.Historian: it reads the feed key's versions
// after revision after, up to the feed key's revision in this process's
// latest snapshot. Revisions compacted away are skipped.
func (s *Store) History(ctx context.Context, after uint64, limit int, fn func(store.Commit) error) (last uint64, more bool, err error) {
	if err := s.enter(); err != nil {
		return 0, false, err
	}
	defer s.leave()
	if limit <= 0 || limit > store.MaxScan {
		limit = store.MaxScan
	}
	last = after
	upto := s.snap.Load().feedMod
	if upto <= int64(after) {
		return last, false, nil
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	from := int64(after) + 1
	n := 0
	for from <= upto {
		wch := s.cli.Watch(clientv3.WithRequireLeader(wctx), s.feedK, clientv3.WithRev(from))
		restart := false
		for resp := range wch {
			if resp.CompactRevision > 0 {
				// What is older is gone: go on from the oldest kept.
				from, restart = max(resp.CompactRevision, from), true
				break
			}
			if err := resp.Err(); err != nil {
				return last, false, s.fail(ctx, "reading the history", err)
			}
			for _, ev := range resp.Events {
				rev := ev.Kv.ModRevision
				if ev.Type != mvccpb.PUT || rev < from {
					continue
				}
				if rev > upto {
					return last, false, nil
				}
				if n == limit {
					return last, true, nil
				}
				cms, err := s.historyAt(wctx, rev, ev.Kv.Value)
				if err != nil {
					return last, false, err
				}
				for _, cm := range cms {
					if err := fn(cm); err != nil {
						return last, false, err
					}
				}
				if len(cms) > 0 {
					n++
				}
				last = uint64(rev)
				if rev == upto {
					return last, false, nil
				}
				from = rev + 1
			}
		}
		if !restart {
			if err := wctx.Err(); err != nil {
				return last, false, s.fail(ctx, "reading the history", err)
			}
			return last, false, s.fail(ctx, "reading the history", errors.New("the watch ended"))
		}
	}
	return last, false, nil
}

// historyAt decodes the history of revision rev from the feed key's value
// then: one record, or one per member of a group commit (those whose
// witness was put at rev: the others' compares failed), each with its own
// origin. None for a value without history (a lease's change set).
func (s *Store) historyAt(ctx context.Context, rev int64, val []byte) ([]store.Commit, error) {
	bad := func(err error) ([]store.Commit, error) {
		return nil, fmt.Errorf("etcdstore: the history of revision %d: %w", rev, err)
	}
	one := func(v []byte) ([]store.Commit, error) {
		_, hist, err := splitFeed(v)
		if err != nil {
			return bad(err)
		}
		if hist == nil {
			return nil, nil
		}
		cm, err := store.DecodeCommit(uint64(rev), hist)
		if err != nil {
			return bad(err)
		}
		return []store.Commit{cm}, nil
	}
	if len(val) == 0 || val[0] != groupVersion {
		return one(val)
	}
	ms, err := decodeGroup(val)
	if err != nil {
		return bad(err)
	}
	var out []store.Commit
	for _, m := range ms {
		resp, err := s.cli.Get(ctx, s.prefix+m.witness, clientv3.WithRev(rev), clientv3.WithKeysOnly())
		if err != nil {
			return nil, s.fail(ctx, "reading the history", err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
			continue
		}
		cms, err := one(m.cs)
		if err != nil {
			return nil, err
		}
		out = append(out, cms...)
	}
	return out, nil
}

// HistoryStats implements store.Historian: the oldest record etcd still
// keeps (one read of its history); etcd does not count them.
func (s *Store) HistoryStats(ctx context.Context) (store.HistoryStats, error) {
	var st store.HistoryStats
	_, _, err := s.History(ctx, uint64(max(s.compacted.Load()-1, 0)), 1, func(cm store.Commit) error {
		st.Oldest, st.OldestTime = cm.Rev, cm.Time
		return nil
	})
	return st, err
}
