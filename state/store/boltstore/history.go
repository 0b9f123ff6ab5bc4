package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
)

// The history of commits (store.Historian): the record of each commit
// that wrote, under its revision (8 bytes, big endian), put in the
// commit's own bbolt transaction by commitBatch. Unlike the change sets it
// is not pruned by the commits themselves: the daemon prunes it in the
// background (PruneHistory) by the operator's retention.
//
// A batch's records go together (putHistory, once the batch's functions
// have run) to "meta/histstage", a bucket of one page at most, while they
// fit in it (histStageMaxBytes, about ten status records); when they do
// not, the stage's records and the batch's move together to
// "meta/history", which holds the rest, and the stage is made anew,
// empty. A put into meta/history materialises its newest leaf and the
// branches above it, which with days of records hold hundreds of entries
// each: when every record went there that cost a serial commit ~14 KB of
// allocations (31.7 KB a status write, against 17.7 KB without history).
// Smaller stages cost more, and so do larger ones, with records of ~310
// bytes over 100,000 kept (BenchmarkUpdateSerialLongHistory: 768 bytes
// 22.3 KB a write, 1 KiB 21.4 KB, 1.5 KiB 20.8 KB, 3 KiB 20.0 KB, 6 KiB
// 23.3 KB); so did a third, inline, bucket before the stage (bbolt writes
// an inline bucket's whole value out at each commit). Every revision in
// histstage is newer than every one in history, so the two read in
// revision order one after the other (historyBuckets).
const histStageMaxBytes = 3 << 10 // under a page (4 KiB): one leaf, no branch

var _ store.Historian = (*Store)(nil)

// pendingRecord is the history record of one commit of a batch, not yet
// stored: its revision, and where its key (the revision, 8 bytes) and
// then the record are in Store.arena.
type pendingRecord struct {
	rev        uint64
	start, end int
}

// putHistory stores the history records of a batch's commits, in
// revision order; arena holds them. They go to the stage when they fit
// in it (stageBytes is what it holds, -1: not known); when they do not,
// the stage's records and then the batch's go to meta/history together,
// and the stage is made anew, empty. So a group commit of many writers
// moves the stage once, not once every ten of its functions. It returns
// what the stage holds after.
func putHistory(tx *bolt.Tx, recs []pendingRecord, arena []byte, stageBytes int) (int, error) {
	if len(recs) == 0 {
		return stageBytes, nil
	}
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("boltstore: storing the history of revision %d: %w: %w", recs[0].rev, store.ErrUnavailable, err)
	}
	stage := tx.Bucket(histStageBucket)
	if stageBytes < 0 {
		stageBytes = bucketBytes(stage)
	}
	n := stageBytes
	for _, r := range recs {
		n += recordBytes(r)
	}
	if n <= histStageMaxBytes {
		for _, r := range recs {
			if err := stage.Put(arena[r.start:r.start+8], arena[r.start+8:r.end:r.end]); err != nil {
				return fail(err)
			}
		}
		return n, nil
	}
	older := tx.Bucket(historyBucket)
	older.FillPercent = 1 // appended in revision order: leave no room in full pages
	if stageBytes > 0 {
		c := stage.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := older.Put(k, v); err != nil { // Put copies k; v stays valid for the transaction
				return fail(err)
			}
		}
		// Emptied at once: its pages are freed, and it is inline again.
		if err := tx.DeleteBucket(histStageBucket); err != nil {
			return fail(err)
		}
		if _, err := tx.CreateBucket(histStageBucket); err != nil {
			return fail(err)
		}
	}
	for _, r := range recs {
		if err := older.Put(arena[r.start:r.start+8], arena[r.start+8:r.end:r.end]); err != nil {
			return fail(err)
		}
	}
	return 0, nil
}

// bucketBytes is about what a small bucket's keys and values take in its
// page (each with bbolt's 16-byte element header).
func bucketBytes(b *bolt.Bucket) int {
	n := 0
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		n += 16 + len(k) + len(v)
	}
	return n
}

// recordBytes is what r takes in a leaf page, as bucketBytes counts it.
func recordBytes(r pendingRecord) int { return 16 + r.end - r.start }

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
		n := 0
		for _, name := range historyBuckets {
			b := tx.Bucket(name)
			if b == nil {
				return nil // a file of an older schema opened read-only
			}
			c := b.Cursor()
			for k, v := c.Seek(u64(last + 1)); k != nil; k, v = c.Next() {
				rev, _ := historyRev(k)
				if rev != last || n == 0 {
					// A new revision (a revision's records, carried from
					// an etcd group commit, are never split).
					if n == limit {
						more = true
						return nil
					}
					n++
				}
				cm, err := store.DecodeCommit(rev, v)
				if err != nil {
					return fmt.Errorf("boltstore: decoding the history of revision %d: %w", rev, err)
				}
				if err := fn(cm); err != nil {
					return err
				}
				last = rev
			}
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
		for _, name := range historyBuckets {
			b := tx.Bucket(name)
			if b == nil {
				return nil
			}
			if k, v := b.Cursor().First(); k != nil && st.Oldest == 0 {
				st.Oldest, _ = historyRev(k)
				st.OldestTime, _ = store.CommitTime(v)
			}
			bs := b.Stats()
			st.Records += int64(bs.KeyN)
			st.Bytes += int64(bs.LeafInuse + bs.BranchInuse + bs.InlineBucketInuse)
		}
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
		for _, name := range historyBuckets {
			c := t.btx.Bucket(name).Cursor()
			prev := uint64(0)
			for k, v := c.First(); k != nil; k, v = c.Next() {
				rev, _ := historyRev(k)
				if n >= max && rev != prev {
					return nil // a revision's records go together
				}
				prev = rev
				tm, err := store.CommitTime(v)
				if err != nil {
					return fmt.Errorf("boltstore: the history of revision %d: %w", rev, err)
				}
				if !r.Prunes(rev, tm, at, now) {
					return nil
				}
				t.metaDelete(name, bytes.Clone(k))
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
