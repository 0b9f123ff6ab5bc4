package etcdstore

import (
	"slices"
	"time"

	"github.com/provisiond/provisiond/state/internal/failpoint"
	"github.com/provisiond/provisiond/watcher"
)

// lastFed is the change set the feed was last handed, kept only in a
// build with failpoints (for the planted bug "repeat"); the feed is
// handed change sets under applyMu.
var lastFed []watcher.Change

// feed hands cs to the feed (Config.Feed.Apply), through the failpoint
// feed/apply: in a build with failpoints, "skip" drops it (a planted bug:
// watchers miss the change) and "repeat" hands the previous change set
// again with it (a planted bug: watchers get a change twice).
func (s *Store) feed(cs watcher.ChangeSet) {
	if s.cfg.Feed.Apply == nil {
		return
	}
	if failpoint.Enabled {
		switch failpoint.Eval("feed/apply") {
		case failpoint.Skip:
			return
		case failpoint.Repeat:
			prev := lastFed
			lastFed = cs.Changes
			cs.Changes = append(slices.Clone(prev), cs.Changes...)
		default:
			lastFed = cs.Changes
		}
	}
	s.cfg.Feed.Apply(cs)
}

// commitLate is the planted bug of the failpoint store/commit's "early":
// the write is answered as committed at once and sent to etcd 50ms later
// (lost if the process dies meanwhile; not read back by this process until
// then). Only a build with failpoints can reach it.
func (s *Store) commitLate(p *proposal, snap *snapshot) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	go func() { // owned by the store: enter/leave hold Close until it is done
		defer s.leave()
		time.Sleep(50 * time.Millisecond)
		s.propose(s.ctx, p)
	}()
	return uint64(snap.rev) + 1, nil
}
