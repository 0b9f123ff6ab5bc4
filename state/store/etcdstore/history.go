package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
)

// The history of commits (store.Historian) on etcd. Each commit's history
// record travels in its change set on the feed key (a version-3 value,
// changes.go), in the commit's own etcd transaction: it is exactly as
// durable as the commit. The archiver (archive.go) then copies the
// records, once their revisions are known, from etcd's history of the
// feed key to keys of their own outside the prefix, and the compactor
// never compacts past the newest revision archived; so etcd's history
// holds one compaction interval as it would without history, and the
// archive each record once.
//
// History reads the archive first, then, for what is newer, the feed
// key's history (a watch of the feed key from a revision, which etcd
// serves from its store by revision range): nothing is missing between
// the two. When the feed key's history it wants has been compacted
// meanwhile (the archiver moved on and the compactor followed), it reads
// the archive again from where it was.

var _ store.Historian = (*Store)(nil)

// History implements store.Historian: the archive, then the feed key's
// versions, up to the feed key's revision in this process's latest
// snapshot. Revisions neither archived nor kept by etcd (compacted away
// without being archived: ReclaimSpace's compaction, the compactor's when
// etcd is out of space, an operator's or etcd's own auto-compaction) are
// lost: a read after a revision before them fails with
// store.ErrHistoryGone, and a read after 0 starts after them.
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
	if int64(after) >= upto {
		return last, false, nil
	}
	// What is archived is read from the archive only: etcd's history may
	// still hold what the pruner deleted from it.
	m, err := s.readMark(ctx)
	if err != nil {
		return last, false, err
	}
	lost, err := s.historyLost(ctx, m, upto)
	if err != nil {
		return last, false, err
	}
	gone := func(lost uint64) error {
		return fmt.Errorf("etcdstore: reading the history after revision %d: %w: the records up to revision %d were compacted before they were archived",
			after, store.ErrHistoryGone, lost)
	}
	if after < lost {
		if after > 0 {
			return last, false, gone(lost)
		}
		last = lost
	}
	n := 0
	fromArchive := false
	// visit hands fn the records of one revision; false: limit reached.
	visit := func(rev int64, recs [][]byte) (bool, error) {
		if len(recs) == 0 {
			last = uint64(rev)
			return true, nil
		}
		if n == limit {
			more = true
			return false, nil
		}
		for _, rec := range recs {
			cm, err := store.DecodeCommit(uint64(rev), rec)
			if err != nil {
				return false, fmt.Errorf("etcdstore: the history of revision %d: %w", rev, err)
			}
			if err := fn(cm); err != nil {
				return false, err
			}
		}
		n++
		last = uint64(rev)
		return true, nil
	}
	err = func() error {
		for int64(last) < upto {
			before := last
			goOn, err := s.archived(ctx, last, upto, func(rev int64, recs [][]byte) (bool, error) {
				fromArchive = true
				return visit(rev, recs)
			})
			if err != nil || !goOn {
				return err
			}
			if int64(last) >= upto {
				return nil
			}
			if last < m.rev {
				last = min(m.rev, uint64(upto)) // pruned from the archive
				before = last
			}
			compacted, err := s.feedRecords(ctx, int64(last)+1, upto, visit)
			if err != nil {
				if errors.Is(err, errStopped) {
					return nil
				}
				return err
			}
			if compacted == 0 {
				return nil // read to upto
			}
			if last == before {
				// Neither the archive nor etcd has what follows last:
				// compacted while this read went on. Lost, unless the
				// feed key was not written between last and the
				// compaction (another prefix's writes moved etcd on).
				lostTo, err := s.lostBefore(ctx, int64(last), compacted)
				if err != nil {
					return err
				}
				if lostTo > 0 {
					return gone(uint64(lostTo))
				}
				last = uint64(compacted - 1)
			}
		}
		return nil
	}()
	if err != nil {
		return last, false, err
	}
	if fromArchive {
		// Checked after reading: the archiver may have met records lost
		// meanwhile and archived what followed them, which this read
		// would then have crossed.
		m2, err := s.readMark(ctx)
		if err != nil {
			return last, false, err
		}
		if m2.lost > max(after, lost) {
			return last, false, gone(m2.lost)
		}
	}
	return last, more, nil
}

// historyLost returns the newest revision whose records were lost
// (compacted away before they were archived; 0: none): as the archive's
// mark m keeps it, or, when etcd has compacted past the revision after
// the mark and the archiver has not yet seen it, the revision before
// etcd's compact revision (a compaction to revision C removes the
// versions older than C and keeps C's).
func (s *Store) historyLost(ctx context.Context, m mark, upto int64) (uint64, error) {
	from := int64(m.rev) + 1
	if from > upto {
		return m.lost, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	_, err := s.cli.Get(rctx, s.feedK, clientv3.WithRev(from), clientv3.WithKeysOnly())
	cancel()
	if err == nil {
		return m.lost, nil
	}
	if !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
		return 0, s.fail(ctx, "reading the history", err)
	}
	// Which revision: a watch from a compacted revision is answered with
	// etcd's compact revision at once.
	compacted, err := s.feedRecords(ctx, from, upto, func(int64, [][]byte) (bool, error) { return false, nil })
	if err != nil && !errors.Is(err, errStopped) {
		return 0, err
	}
	if compacted > from {
		lostTo, err := s.lostBefore(ctx, int64(m.rev), compacted)
		if err != nil {
			return 0, err
		}
		return max(m.lost, uint64(lostTo)), nil
	}
	return m.lost, nil
}

// lostBefore returns the newest revision after after whose records etcd's
// compaction to revision compacted removed (0: none): etcd keeps, as of a
// compact revision, only each key's latest version, so the feed key's
// version then says whether the feed was written after after. Not
// written: nothing of this prefix's was lost (other writers to the
// cluster, another prefix, moved etcd's revision on). Written at
// compacted: that version is kept and only older ones may be gone.
// Written before it: that version is not in the history read from
// compacted on, and counts as lost with whatever preceded it.
func (s *Store) lostBefore(ctx context.Context, after, compacted int64) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	resp, err := s.cli.Get(rctx, s.feedK, clientv3.WithRev(compacted), clientv3.WithKeysOnly())
	cancel()
	if err != nil {
		return 0, s.fail(ctx, "reading the history", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision <= after {
		return 0, nil
	}
	if mod := resp.Kvs[0].ModRevision; mod < compacted {
		return mod, nil
	}
	return compacted - 1, nil
}

// errStopped ends a read of the feed key's history early (its visitor
// said so, without an error of its own).
var errStopped = errors.New("etcdstore: stopped")

// feedRecords calls fn with the history records of each version of the
// feed key from revision from to upto, in revision order (a version
// without records, such as a lease's change set, with none), until fn
// returns false (then errStopped). It returns the oldest revision etcd
// keeps (compacted > 0) when from is older than it: the caller decides
// how to go on.
//
// The versions come in pages (etcd answers a watch from a past revision
// a batch of revisions at a time): each page must come within the
// request timeout, and ctx bounds the whole, so a long stretch of history
// (a resume after a restart) is read however long it takes while etcd
// answers.
func (s *Store) feedRecords(ctx context.Context, from, upto int64, fn func(rev int64, recs [][]byte) (bool, error)) (compacted int64, err error) {
	if from > upto {
		return 0, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.cli.Watch(clientv3.WithRequireLeader(wctx), s.feedK, clientv3.WithRev(from))
	page := time.NewTimer(s.cfg.RequestTimeout)
	defer page.Stop()
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-wch:
		case <-page.C:
			return 0, s.fail(ctx, "reading the history", fmt.Errorf("no answer from etcd in %s: %w", s.cfg.RequestTimeout, context.DeadlineExceeded))
		}
		if !ok {
			break
		}
		if resp.CompactRevision > 0 {
			return resp.CompactRevision, nil
		}
		if err := resp.Err(); err != nil {
			return 0, s.fail(ctx, "reading the history", err)
		}
		for _, ev := range resp.Events {
			rev := ev.Kv.ModRevision
			if ev.Type != mvccpb.PUT || rev < from {
				continue
			}
			if rev > upto {
				return 0, nil
			}
			recs, err := s.historyAt(ctx, rev, ev.Kv.Value)
			if err != nil {
				return 0, err
			}
			ok, err := fn(rev, recs)
			if err != nil {
				return 0, err
			}
			if !ok {
				return 0, errStopped
			}
			if rev == upto {
				return 0, nil
			}
		}
		// The next page's bound starts once this one is handed on.
		page.Reset(s.cfg.RequestTimeout)
	}
	if err := ctx.Err(); err != nil {
		return 0, s.fail(ctx, "reading the history", err)
	}
	return 0, s.fail(ctx, "reading the history", errors.New("the watch ended"))
}

// historyAt returns the history records of revision rev from the feed
// key's value then: one, or one per member of a group commit (those whose
// witness was put at rev: the others' compares failed), each with its own
// origin. None for a value without history (a lease's change set). Each
// record is a slice of val.
func (s *Store) historyAt(ctx context.Context, rev int64, val []byte) ([][]byte, error) {
	bad := func(err error) ([][]byte, error) {
		return nil, fmt.Errorf("etcdstore: the history of revision %d: %w", rev, err)
	}
	if len(val) == 0 || val[0] != groupVersion {
		_, hist, err := splitFeed(val)
		if err != nil {
			return bad(err)
		}
		if hist == nil {
			return nil, nil
		}
		return [][]byte{hist}, nil
	}
	ms, err := decodeGroup(val)
	if err != nil {
		return bad(err)
	}
	var out [][]byte
	for _, m := range ms {
		_, hist, err := splitFeed(m.cs)
		if err != nil {
			return bad(err)
		}
		if hist == nil {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Get(rctx, s.prefix+m.witness, clientv3.WithRev(rev), clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			return nil, s.fail(ctx, "reading the history", err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
			continue
		}
		out = append(out, hist)
	}
	return out, nil
}

// HistoryStats implements store.Historian: the oldest record kept (one
// read of the archive's first batch, or of etcd's history when nothing is
// archived), and the records and bytes archived (kept in the archive's
// mark by the archiver and the pruner).
func (s *Store) HistoryStats(ctx context.Context) (store.HistoryStats, error) {
	var st store.HistoryStats
	m, err := s.readMark(ctx)
	if err != nil {
		return st, err
	}
	st.Records, st.Bytes = m.records, m.bytes
	_, _, err = s.History(ctx, 0, 1, func(cm store.Commit) error {
		st.Oldest, st.OldestTime = cm.Rev, cm.Time
		return nil
	})
	return st, err
}
