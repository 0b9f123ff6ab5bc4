package etcdstore

import (
	"context"
	"sort"
	"sync"

	"github.com/provisiond/provisiond/state/store"
)

// The recent history: the history records of the revisions this process
// applied last, as its feed brought them (the feed key's value carries
// each commit's record: history.go), kept so that the newest commits a
// resumed watch replays are read from memory rather than from etcd
// (store.RecentHistorian). While commits go on, each resume's snapshot is
// newer than what any earlier read of etcd's history reached, so without
// it every resume read etcd again for the few revisions since.
//
// It holds every revision in (lo, hi]: a revision of it without a record
// had none (a lease's change set, another prefix's write). The records are
// the feed values' own bytes, decoded when read. Bounded in bytes (the
// oldest go first, lo moving past them); emptied when the replica is
// reloaded (its feed fell behind a compaction: what it skipped is not
// here).

// recentMaxBytes bounds the feed values the recent history holds.
const recentMaxBytes = 8 << 20

type recentRec struct {
	rev  int64
	recs [][]byte // the revision's records (a group commit: one per member that committed)
	size int      // the bytes they keep alive
}

type recentHistory struct {
	mu     sync.Mutex
	lo, hi int64 // it holds every revision in (lo, hi]
	recs   []recentRec
	bytes  int
}

// reset empties it: it holds the revisions after rev from now on.
func (r *recentHistory) reset(rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lo, r.hi, r.recs, r.bytes = rev, rev, nil, 0
}

// add records revision rev, applied after every revision it holds, with
// its records (none: it had none). Called under applyMu before a view of
// rev is published, so a resume whose snapshot is of rev finds it here.
func (r *recentHistory) add(rev int64, recs [][]byte, size int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rev <= r.hi {
		return
	}
	r.hi = rev
	if len(recs) == 0 {
		return
	}
	r.recs = append(r.recs, recentRec{rev: rev, recs: recs, size: size})
	r.bytes += size
	for r.bytes > recentMaxBytes && len(r.recs) > 0 {
		r.bytes -= r.recs[0].size
		r.lo = r.recs[0].rev
		r.recs[0] = recentRec{}
		r.recs = r.recs[1:]
	}
}

// advance records that every revision up to rev is applied with no
// record of this prefix (a progress notification, a reload at rev is
// reset's).
func (r *recentHistory) advance(rev int64) { r.add(rev, nil, 0) }

// get returns the records of the revisions in (after, upto], if it holds
// them all.
func (r *recentHistory) get(after, upto int64) ([]recentRec, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if after < r.lo || upto > r.hi {
		return nil, false
	}
	i := sort.Search(len(r.recs), func(n int) bool { return r.recs[n].rev > after })
	k := sort.Search(len(r.recs), func(n int) bool { return r.recs[n].rev > upto })
	return r.recs[i:k:k], true
}

var _ store.RecentHistorian = (*Store)(nil)

// RecentHistory implements store.RecentHistorian: the records of the
// revisions in (after, upto] from what this process's feed brought, when
// it still holds all of them (upto at most the revision it has applied).
func (s *Store) RecentHistory(ctx context.Context, after, upto uint64, fn func(store.Commit) error) (bool, error) {
	rs, ok := s.recent.get(int64(after), int64(upto))
	if !ok {
		return false, nil
	}
	for _, rc := range rs {
		for _, b := range rc.recs {
			cm, err := store.DecodeCommit(uint64(rc.rev), b)
			if err != nil {
				return false, err
			}
			if err := fn(cm); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}
