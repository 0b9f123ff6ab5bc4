package boltstore

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
)

// The history of commits (store.Historian): the record of each commit
// that wrote, under its revision (8 bytes, big endian) in the bucket
// "meta/history", put in the commit's own bbolt transaction by
// commitBatch. Unlike the change sets it is not pruned by the commits
// themselves: the daemon prunes it in the background (PruneHistory) by
// the operator's retention.

var _ store.Historian = (*Store)(nil)

// putHistory stores the history record of revision rev.
func putHistory(tx *bolt.Tx, rev uint64, rec []byte) error {
	if err := tx.Bucket(historyBucket).Put(u64(rev), rec); err != nil {
		return fmt.Errorf("boltstore: storing the history of revision %d: %w: %w", rev, store.ErrUnavailable, err)
	}
	return nil
}

// History implements store.Historian.
func (s *Store) History(ctx context.Context, after uint64, limit int, fn func(store.Commit) error) (last uint64, more bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if limit <= 0 || limit > store.MaxScan {
		limit = store.MaxScan
	}
	last = after
	err = s.viewBolt(func(tx *bolt.Tx) error {
		b := tx.Bucket(historyBucket)
		if b == nil {
			return nil // a file of an older schema opened read-only
		}
		c := b.Cursor()
		n := 0
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			if n == limit {
				more = true
				return nil
			}
			rev, _ := decodeU64(k)
			cm, err := store.DecodeCommit(rev, v)
			if err != nil {
				return fmt.Errorf("boltstore: decoding the history of revision %d: %w", rev, err)
			}
			if err := fn(cm); err != nil {
				return err
			}
			last = rev
			n++
		}
		return nil
	})
	return last, more, err
}

// HistoryStats implements store.Historian. It walks the bucket's pages
// (bbolt's bucket statistics): a few milliseconds for a million records.
func (s *Store) HistoryStats(ctx context.Context) (store.HistoryStats, error) {
	var st store.HistoryStats
	err := s.viewBolt(func(tx *bolt.Tx) error {
		b := tx.Bucket(historyBucket)
		if b == nil {
			return nil
		}
		k, v := b.Cursor().First()
		if k == nil {
			return nil
		}
		st.Oldest, _ = decodeU64(k)
		st.OldestTime, _ = store.CommitTime(v)
		bs := b.Stats()
		st.Records = int64(bs.KeyN)
		st.Bytes = int64(bs.LeafInuse + bs.BranchInuse + bs.InlineBucketInuse)
		return nil
	})
	return st, err
}

// PruneHistory deletes the oldest history records that fall outside r
// (at the store's revision and now), at most max of them (max <= 0:
// MaxScan) in one commit, and returns how many it deleted: a caller prunes
// in bounded batches until fewer than max are deleted.
func (s *Store) PruneHistory(ctx context.Context, r store.Retention, now time.Time, max int) (int, error) {
	if max <= 0 || max > store.MaxScan {
		max = store.MaxScan
	}
	n := 0
	_, err := s.update(ctx, func(t *txn) error {
		n = 0
		at := t.rev
		c := t.btx.Bucket(historyBucket).Cursor()
		for k, v := c.First(); k != nil && n < max; k, v = c.Next() {
			rev, _ := decodeU64(k)
			tm, err := store.CommitTime(v)
			if err != nil {
				return fmt.Errorf("boltstore: the history of revision %d: %w", rev, err)
			}
			if !r.Prunes(rev, tm, at, now) {
				break
			}
			t.metaDelete(historyBucket, u64(rev))
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
