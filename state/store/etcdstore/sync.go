package etcdstore

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
)

// Sync returns once the replica holds every commit of the prefix made
// before Sync was called: a linearizable read of the feed key (which needs
// a quorum, and which every commit of ours writes) gives the latest
// commit's revision, and Sync waits for the replica to have applied it.
// It fails with store.ErrUnavailable when etcd does not answer within
// RequestTimeout or the replica does not catch up within it. A read that
// must not trust a stale replica (a credential check: a password changed
// through another daemon must not be accepted here after the change was
// acknowledged) runs after Sync.
//
// Calls at the same time share reads: a call joins the read in flight if
// that read was sent after the call began, and otherwise waits for it to
// end and then sends, or joins, the next. So a burst of calls costs two
// reads or so, and every call is answered by a read sent after it began.
// (This is how Kubernetes' apiserver serves a consistent read from its
// watch cache: a quorum read of the current revision, then a wait for the
// cache to reach it.) For a quarter of RequestTimeout after a read failed,
// calls fail at once with its error: refusing is always safe, and while
// etcd cannot be reached the calls do not each wait RequestTimeout. A
// call whose ctx ends first returns ctx's error; the read goes on for the
// others.
func (s *Store) Sync(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	s.syncMu.Lock()
	if s.syncErr != nil && time.Since(s.syncFailed) < s.cfg.RequestTimeout/4 {
		err := s.syncErr
		s.syncMu.Unlock()
		return err
	}
	arrival := s.syncSeq
	for {
		r := s.syncCur
		switch {
		case r == nil:
			s.syncSeq++
			r = &syncRound{seq: s.syncSeq, done: make(chan struct{})}
			s.syncCur = r
			s.syncMu.Unlock()
			// The read is the round's, not this call's: it runs on a
			// goroutine of its own (counted in inflight, so Close waits
			// for it), and this call waits for it as a joiner does, until
			// its ctx ends.
			s.inflight.Add(1)
			go s.runSync(r)
			select {
			case <-r.done:
				return r.err
			case <-ctx.Done():
				return ctx.Err()
			}
		case r.seq > arrival:
			// Sent after this call began: its answer is good for it.
			s.syncMu.Unlock()
			select {
			case <-r.done:
				return r.err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		// Sent before this call began: wait for it to end, then send or
		// join the next.
		s.syncMu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.syncMu.Lock()
	}
}

// syncRound is one read of Sync, shared by the calls that join it.
type syncRound struct {
	seq  uint64
	done chan struct{} // closed once err is set
	err  error
}

// runSync runs round r's read and answers the calls waiting for it.
func (s *Store) runSync(r *syncRound) {
	defer s.inflight.Done()
	err := s.syncOnce()
	s.syncMu.Lock()
	s.syncCur = nil
	s.syncErr, s.syncFailed = err, time.Now()
	r.err = err
	s.syncMu.Unlock()
	close(r.done)
}

// syncOnce reads the feed key's mod revision and waits for the replica to
// apply it, within RequestTimeout.
func (s *Store) syncOnce() error {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	asked := time.Now().UnixNano()
	resp, err := s.cli.Get(ctx, s.feedK, clientv3.WithKeysOnly())
	if err != nil {
		return s.fail(context.Background(), "reading the latest commit's revision", err)
	}
	var mod int64
	if len(resp.Kvs) > 0 {
		mod = resp.Kvs[0].ModRevision
	}
	if mod <= s.delivered.Load() {
		s.hear(asked) // as the probe does: the watch was current at the read
	}
	if err := s.waitApplied(ctx, mod); err != nil {
		return fmt.Errorf("etcdstore: %w: the replica has not applied revision %d, the latest commit's, within %s: %w",
			store.ErrUnavailable, mod, s.cfg.RequestTimeout, err)
	}
	return nil
}
