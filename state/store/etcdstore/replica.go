package etcdstore

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/provisiond/provisiond/state/internal/failpoint"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// btreeDegree: a copy-on-write write copies one node per level, up to
// 2*degree-1 items of 48 bytes each. At 100,000 records degree 16 (five
// levels) allocated 7.4 KB and took two thirds of the time per write and
// clone of degree 32 (four levels, 10.9 KB) in a same-run measurement;
// degree 8 was slower again. Items are values, not pointers: a pointer
// item copies less but makes every lookup allocate its probe.
const btreeDegree = 16

// loadPage is how many keys one Get of a load or dump reads.
const loadPage = 1000

// loadAttempts bounds the tries of one page of a load that etcd does not
// answer (unanswered: too slow, no leader, the connection cut), each with
// RequestTimeout and a backoff before the next: several daemons of a
// large controller starting at once load the whole model each, and etcd
// answers them late. A load is so bounded by its progress, not by the
// model's size; the caller's ctx bounds it as a whole.
const loadAttempts = 5

// loadRestarts bounds how often a load begins again because the
// revision it reads at was compacted under it (a load slower than the
// compaction's retention).
const loadRestarts = 3

// load reads the whole prefix at one revision, in pages, into a new tree.
func (s *Store) load(ctx context.Context) (*snapshot, error) {
	for restart := 0; ; restart++ {
		snap, err := s.loadAt(ctx)
		if err == nil || !errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) || restart+1 == loadRestarts {
			if err != nil {
				return nil, s.fail(ctx, "loading the replica", err)
			}
			return snap, nil
		}
		s.log.Warn("loading the replica: its revision was compacted; loading again", "err", err)
	}
}

// loadAt is one attempt of load: its first page fixes the revision the
// others are read at. It returns etcd's error unwrapped.
func (s *Store) loadAt(ctx context.Context) (*snapshot, error) {
	tree := btree.NewG(btreeDegree, itemLess)
	snap := &snapshot{tree: tree}
	end := clientv3.GetPrefixRangeEnd(s.prefix)
	from := s.prefix
	backoff := 100 * time.Millisecond
	for attempt := 1; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPage)}
		if snap.rev != 0 {
			opts = append(opts, clientv3.WithRev(snap.rev))
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !unanswered(err) || attempt == loadAttempts {
				return nil, err
			}
			s.log.Warn("loading the replica: etcd did not answer a page; asking again",
				"keys", tree.Len(), "attempt", attempt, "err", err)
			if err := sleepCtx(ctx, backoff); err != nil {
				return nil, err
			}
			attempt, backoff = attempt+1, min(2*backoff, 2*time.Second)
			continue
		}
		attempt, backoff = 1, 100*time.Millisecond
		if snap.rev == 0 {
			snap.rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key[len(s.prefix):])
			if key == feedKey {
				snap.feedMod = kv.ModRevision
			}
			if store.Kind(key) == store.MetaKind {
				continue
			}
			tree.ReplaceOrInsert(item{key: key, val: kv.Value, mod: kv.ModRevision})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return snap, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) publish(snap *snapshot) { s.snap.Store(snap) }

// errCompacted: the watch's start revision has been compacted away.
var errCompacted = errors.New("etcdstore: watch revision compacted")

// follow is the watch goroutine: it applies every revision of the prefix
// to the replica, hands the change sets to the feed, and starts the watch
// again after an error (reloading when history was compacted meanwhile).
// Each watch starts after the latest revision applied, by it or by an
// Update that applied its own commit (applyOwn).
func (s *Store) follow() {
	defer s.wg.Done()
	backoff := 50 * time.Millisecond
	for again := false; ; again = true {
		watched := s.applied.Load()
		s.applyMu.Lock()
		s.deliver(watched) // the new watch starts after it
		s.applyMu.Unlock()
		if failpoint.Enabled && again && failpoint.Eval("replica/catch-up") == failpoint.Skip {
			watched++ // the planted bug: the catch-up starts a revision late
		}
		established, err := s.watch(watched)
		if s.ctx.Err() != nil {
			return
		}
		if errors.Is(err, errCompacted) {
			loaded, lerr := s.load(s.ctx)
			if lerr != nil {
				s.log.Warn("reloading the replica after compaction", "err", lerr)
				if !s.pause(&backoff) {
					return
				}
				continue
			}
			s.stats.resets.Add(1)
			s.log.Warn("the change feed fell behind etcd's compaction: replica reloaded, every watcher woken",
				"from", watched, "to", loaded.rev)
			s.applyMu.Lock()
			// An Update may have applied its own commit meanwhile (one
			// at the revision after the latest applied): below the
			// compaction, and so below loaded.rev, whose snapshot has it.
			s.work = loaded.tree.Clone()
			s.deliver(loaded.rev)
			s.heard.Store(time.Now().UnixNano())
			s.publish(loaded)
			s.recent.reset(loaded.rev)
			if s.cfg.Feed.Reset != nil {
				s.cfg.Feed.Reset(uint64(loaded.rev))
			}
			s.setApplied(loaded.rev)
			s.applyMu.Unlock()
			backoff = 50 * time.Millisecond
			continue
		}
		s.stats.reconnects.Add(1)
		if established {
			// A stream etcd had accepted broke (a member restarting,
			// a connection cut): start again at once, as clientv3's
			// own watch would, not after a grown backoff.
			s.log.Info("etcd watch stream ended; starting again", "from", s.applied.Load()+1, "err", err)
			backoff = 50 * time.Millisecond
		} else {
			s.log.Warn("etcd watch failed; starting again", "from", s.applied.Load()+1, "err", err)
			if s.delivered.Load() > watched {
				backoff = 50 * time.Millisecond // it made progress: not a failing loop
			}
		}
		if !s.pause(&backoff) {
			return
		}
	}
}

// pause waits for the backoff (doubling it, up to 2 s) or Close.
func (s *Store) pause(backoff *time.Duration) bool {
	t := time.NewTimer(*backoff)
	defer t.Stop()
	*backoff = min(2**backoff, 2*time.Second)
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// watch follows one watch from revision from + 1 until it fails, with a
// probe that keeps an idle replica known current. It is etcd's watch
// stream itself, read on this goroutine: clientv3's Watch would pass every
// response through three goroutines of its own (a stream reader, a
// substream and its buffer) before this one, which under a lone writer
// cost the daemon 47 µs of CPU per write for revisions it had applied
// already (docs/scale-out.md, "Figures"). What clientv3 would add, the
// store does: starting again after an error (follow), from the revision
// after the latest applied. established says whether etcd had accepted
// the watch (its created response came) before it ended.
func (s *Store) watch(from int64) (established bool, err error) {
	// WithRequireLeader: a member that loses its quorum ends the watch
	// (rather than serving a stream that no longer moves).
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(s.ctx))
	defer cancel()
	probeDone := make(chan struct{})
	go s.probe(wctx, probeDone)
	defer func() { cancel(); <-probeDone }()
	// The call options clientv3 gives its own watch: wait for a
	// connection rather than fail at once, and take a response of any size
	// (a catch-up of large revisions exceeds gRPC's default 4 MiB).
	stream, err := etcdserverpb.NewWatchClient(s.cli.ActiveConnection()).Watch(wctx,
		grpc.WaitForReady(true), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err != nil {
		return false, err
	}
	err = stream.Send(&etcdserverpb.WatchRequest{RequestUnion: &etcdserverpb.WatchRequest_CreateRequest{
		CreateRequest: &etcdserverpb.WatchCreateRequest{
			Key:           []byte(s.prefix),
			RangeEnd:      []byte(clientv3.GetPrefixRangeEnd(s.prefix)),
			StartRevision: from + 1,
		}}})
	if err != nil {
		// The stream's own error (a Send after the stream ended says
		// only io.EOF) comes with Recv.
		if _, rerr := stream.Recv(); rerr != nil {
			err = rerr
		}
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if cerr := s.ctx.Err(); cerr != nil {
				return established, cerr
			}
			if errors.Is(rpctypes.Error(err), rpctypes.ErrCompacted) {
				return established, errCompacted
			}
			return established, err
		}
		if resp.CompactRevision != 0 {
			s.noteCompacted(resp.CompactRevision)
			return established, fmt.Errorf("%w (at %d, needed %d)", errCompacted, resp.CompactRevision, from+1)
		}
		if resp.Canceled {
			return established, fmt.Errorf("etcdstore: watch cancelled by etcd: %s", resp.CancelReason)
		}
		if resp.Created {
			// Its header is etcd's current revision: the catch-up from
			// from+1, if any, is still to come.
			established = true
			continue
		}
		s.hear(time.Now().UnixNano())
		s.apply(resp.Events, resp.GetHeader().GetRevision())
	}
}

// probe keeps an idle replica known current: whenever a quarter of
// StaleAfter passes without word from the watch, it reads the feed key
// (a linearizable read: it needs a quorum). If no commit of ours is newer
// than what the replica has applied, the replica is current as of that
// read. (etcd's progress notifications cannot serve here: etcd sends none
// to a watcher whose start revision is ahead of its current revision,
// which is where a caught-up watch resumes after a reconnection.) It owns
// no state but its ticker; watch stops it by cancelling ctx.
func (s *Store) probe(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	every := max(s.cfg.StaleAfter/4, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Duration(time.Now().UnixNano()-s.heard.Load()) < every {
			continue
		}
		asked := time.Now().UnixNano()
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Get(rctx, s.feedK, clientv3.WithKeysOnly())
		cancel()
		if err != nil {
			continue // silence is what fresh measures
		}
		var mod int64
		if len(resp.Kvs) > 0 {
			mod = resp.Kvs[0].ModRevision
		}
		if mod <= s.delivered.Load() {
			s.hear(asked)
		}
	}
}

// deliver records that the watch has delivered every revision of the
// prefix up to rev (whether apply applied it or found it applied already).
func (s *Store) deliver(rev int64) {
	if rev > s.delivered.Load() {
		s.delivered.Store(rev) // only the watch goroutine, under applyMu
	}
}

// hear records word from etcd at t (unix nanos) that the replica is current.
func (s *Store) hear(t int64) {
	for {
		old := s.heard.Load()
		if t <= old || s.heard.CompareAndSwap(old, t) {
			return
		}
	}
}

// revChanges is the part of one watch response at one revision.
type revChanges struct {
	rev      int64
	recorded []watcher.Change // the change set of ours the revision carries
	derived  []watcher.Change // the changes of its events, for a revision without one
	hasFeed  bool             // the revision carries a change set of ours
	bad      bool             // ... which would not decode
	group    []byte           // a group commit's feed value, decoded at the revision's end
	hist     [][]byte         // the history records it carries (recent.go)
	histSize int              // the bytes they keep alive
}

// apply applies the events of one watch response (whole revisions, in
// order: etcd's watchable store sends the events of one revision in one
// response, and batches of catch-up events end at revision boundaries),
// publishes one snapshot of the last, then hands each revision's change
// set to the feed and wakes the Updates waiting for them. The snapshot is
// published before Apply: a watcher that subscribes in between reads the
// new state and then sees a change at or below its snapshot's revision,
// which it ignores; the other order would lose the change for it.
// Revisions an Update applied already (applyOwn) are skipped.
func (s *Store) apply(evs []*mvccpb.Event, hdrRev int64) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	// A response's header revision is etcd's current revision, not what
	// the watch has sent: a catch-up batch (at most 1,000 revisions)
	// carries it while more batches are to come. Only an empty response
	// (a progress notification, which etcd sends only to a watch that is
	// caught up) vouches for it.
	progress := len(evs) == 0
	if progress {
		s.deliver(hdrRev)
	} else {
		s.deliver(evs[len(evs)-1].Kv.ModRevision)
	}
	done := s.applied.Load()
	for len(evs) > 0 && evs[0].Kv.ModRevision <= done {
		evs = evs[1:]
	}
	snap := s.snap.Load()
	if len(evs) == 0 {
		if progress && hdrRev > snap.rev {
			s.recent.advance(hdrRev)
			s.publish(&snapshot{tree: snap.tree, rev: hdrRev, feedMod: snap.feedMod})
			s.setApplied(hdrRev)
		}
		return
	}
	var revs []revChanges
	feedMod := snap.feedMod
	t := s.work
	for _, ev := range evs {
		rev := ev.Kv.ModRevision
		if len(revs) == 0 || revs[len(revs)-1].rev != rev {
			if len(revs) > 0 && revs[len(revs)-1].group != nil {
				// The revision's keys are all applied, none of a later one.
				s.groupChanges(t, &revs[len(revs)-1])
			}
			revs = append(revs, revChanges{rev: rev})
		}
		rc := &revs[len(revs)-1]
		key := string(ev.Kv.Key[len(s.prefix):])
		if store.Kind(key) == store.MetaKind {
			if key == feedKey && ev.Type == mvccpb.PUT {
				feedMod = rev
				rc.hasFeed = true
				if len(ev.Kv.Value) > 0 && ev.Kv.Value[0] == groupVersion {
					rc.group = ev.Kv.Value // decoded once the revision's keys are applied
					continue
				}
				cs, hist, err := decodeFeed(ev.Kv.Value)
				if err != nil {
					rc.bad = true
					s.log.Error("undecodable change set in the feed", "rev", rev, "err", err)
				}
				rc.recorded = cs
				if hist != nil {
					rc.hist, rc.histSize = [][]byte{hist}, len(ev.Kv.Value)
				}
			}
			continue
		}
		if ev.Type == mvccpb.DELETE {
			t.Delete(item{key: key})
		} else {
			t.ReplaceOrInsert(item{key: key, val: ev.Kv.Value, mod: rev})
		}
		if !rc.hasFeed {
			rc.derived = append(rc.derived, derived(key, ev))
		}
	}
	if rc := &revs[len(revs)-1]; rc.group != nil {
		s.groupChanges(t, rc)
	}
	last := revs[len(revs)-1].rev
	s.work = t
	// The recent history has a revision before any view of it does: a
	// resume reads it up to its snapshot's revision.
	for i := range revs {
		if rc := &revs[i]; rc.bad {
			s.recent.reset(rc.rev)
		} else {
			s.recent.add(rc.rev, rc.hist, rc.histSize)
		}
	}
	s.publish(&snapshot{tree: t.Clone(), rev: last, feedMod: feedMod})
	for i := range revs {
		rc := &revs[i]
		switch {
		case rc.bad:
			// A change set we cannot read: wake every watcher rather
			// than miss what it said.
			if s.cfg.Feed.Reset != nil {
				s.cfg.Feed.Reset(uint64(rc.rev))
			}
		case rc.hasFeed:
			s.feed(watcher.ChangeSet{Rev: uint64(rc.rev), Changes: rc.recorded})
		case len(rc.derived) > 0:
			// A revision without our change set (a lease's expiry, a
			// write by another tool): the changes derived from its keys.
			s.feed(watcher.ChangeSet{Rev: uint64(rc.rev), Changes: rc.derived})
		}
		s.setApplied(rc.rev)
	}
	s.setApplied(last)
}

// applyOwnOutcomes applies what of group committed (outs[i] is group[i]'s
// outcome), revision by revision, as applyOwn can: one revision when the
// group went as one transaction, one per member when etcd refused the
// group's shape and each went alone.
func (s *Store) applyOwnOutcomes(group []*proposal, outs []outcome) {
	for _, o := range outs {
		if o.err != nil {
			// What became of a member is not known (its answer lost, or
			// missing from the group's): its transaction's revision may
			// hold its writes. The watch brings what happened.
			return
		}
	}
	if len(group) == 1 {
		if outs[0].ok {
			s.applyOwn(outs[0].rev, group)
		}
		return
	}
	var revs []int64
	for _, o := range outs {
		if o.ok && !slices.Contains(revs, o.rev) {
			revs = append(revs, o.rev)
		}
	}
	slices.Sort(revs)
	for _, rev := range revs {
		var members []*proposal
		for i, o := range outs {
			if o.ok && o.rev == rev {
				members = append(members, group[i])
			}
		}
		s.applyOwn(rev, members)
	}
}

// applyOwn applies the commit of members, the proposals that committed at
// rev (in their transaction's order), to the replica without waiting for
// the watch to deliver it, when rev is the revision after the latest
// applied. An etcd revision is one transaction, so the replica at rev-1
// with the members' writes is the prefix at rev, and the members' change
// sets (as their functions recorded them, not decoded again from the feed
// value) are what the watch would hand the feed for it. Otherwise (a
// revision between is not applied yet: another daemon's commit, a lease's
// expiry, a write outside the prefix) the watch brings rev as it brings
// every other. It saves a write the watch's delivery: etcd sends the
// event on the watch stream as it answers the transaction, and the watch
// goroutine's wake-up comes after it. The watch then skips rev (apply).
func (s *Store) applyOwn(rev int64, members []*proposal) {
	if s.applied.Load() != rev-1 {
		return
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.applied.Load() != rev-1 {
		return
	}
	changes := members[0].changes
	if len(members) > 1 {
		changes = nil
		for _, p := range members {
			changes = append(changes, p.changes...)
		}
	}
	t := s.work
	for _, p := range members {
		for _, op := range p.ops {
			key := string(op.KeyBytes()[len(s.prefix):])
			if op.IsDelete() {
				t.Delete(item{key: key})
			} else {
				t.ReplaceOrInsert(item{key: key, val: op.ValueBytes(), mod: rev})
			}
		}
	}
	var hist [][]byte
	size := 0
	for _, p := range members {
		if _, h, err := splitFeed(p.cs); err == nil && h != nil {
			hist = append(hist, h)
			size += len(p.cs)
		}
	}
	s.recent.add(rev, hist, size) // before any view of rev
	s.publish(&snapshot{tree: t.Clone(), rev: rev, feedMod: rev})
	s.feed(watcher.ChangeSet{Rev: uint64(rev), Changes: changes})
	s.stats.ownApplied.Add(1)
	s.setApplied(rev)
}

// groupChanges sets rc.recorded from a group commit's feed value: the
// change sets of the members whose witness the revision put (t has the
// revision's keys applied). The others' nested transactions failed their
// compares and wrote nothing.
func (s *Store) groupChanges(t *btree.BTreeG[item], rc *revChanges) {
	ms, err := decodeGroup(rc.group)
	if err != nil {
		rc.bad = true
		s.log.Error("undecodable group change set in the feed", "rev", rc.rev, "err", err)
		return
	}
	for _, m := range ms {
		if it, ok := t.Get(item{key: m.witness}); !ok || it.mod != rc.rev {
			continue
		}
		cs, hist, err := decodeFeed(m.cs)
		if err != nil {
			rc.bad = true
			s.log.Error("undecodable change set in the feed", "rev", rc.rev, "err", err)
			return
		}
		rc.recorded = append(rc.recorded, cs...)
		if hist != nil {
			rc.hist = append(rc.hist, hist)
			rc.histSize = len(rc.group)
		}
	}
}

// derived is the change an event makes to a key outside a change set of
// ours: created or removed (store.Ephemeral's contract), or a change
// without fields for an overwrite.
func derived(key string, ev *mvccpb.Event) watcher.Change {
	c := watcher.Change{Kind: watcher.Kind(store.Kind(key)), ID: store.Rest(key)}
	switch {
	case ev.Type == mvccpb.DELETE:
		c.Fields = []string{watcher.FieldRemoved}
	case ev.Kv.Version == 1:
		c.Fields = []string{watcher.FieldCreated}
	}
	return c
}

// setApplied records that every revision up to rev has been applied and
// wakes the waiters for them.
func (s *Store) setApplied(rev int64) {
	if rev <= s.applied.Load() {
		return
	}
	s.applied.Store(rev)
	s.waitMu.Lock()
	for len(s.waiters) > 0 && s.waiters[0].rev <= rev {
		w := heap.Pop(&s.waiters).(*waiter)
		close(w.ch)
	}
	s.waitMu.Unlock()
}

// wakeAll wakes every waiter (Close).
func (s *Store) wakeAll() {
	s.waitMu.Lock()
	for len(s.waiters) > 0 {
		close(heap.Pop(&s.waiters).(*waiter).ch)
	}
	s.waitMu.Unlock()
}

// WaitApplied implements store.Store.
func (s *Store) WaitApplied(ctx context.Context, rev uint64) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	return s.waitApplied(ctx, int64(rev))
}

func (s *Store) waitApplied(ctx context.Context, rev int64) error {
	if s.applied.Load() >= rev {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &waiter{rev: rev, ch: make(chan struct{})}
	s.waitMu.Lock()
	if s.applied.Load() >= rev {
		s.waitMu.Unlock()
		return nil
	}
	heap.Push(&s.waiters, w)
	s.waitMu.Unlock()
	select {
	case <-w.ch:
		if s.applied.Load() < rev {
			return store.ErrClosed
		}
		return nil
	case <-s.closing:
		s.drop(w)
		if s.applied.Load() >= rev {
			return nil
		}
		return store.ErrClosed
	case <-ctx.Done():
		s.drop(w)
		if s.applied.Load() >= rev {
			return nil
		}
		return ctx.Err()
	}
}

// drop removes a waiter that gave up, unless it has been woken already.
func (s *Store) drop(w *waiter) {
	s.waitMu.Lock()
	if w.index >= 0 {
		heap.Remove(&s.waiters, w.index)
	}
	s.waitMu.Unlock()
}

// waiter is one WaitApplied call waiting for rev.
type waiter struct {
	rev   int64
	ch    chan struct{}
	index int // in the heap; -1 once popped
}

// waitHeap orders waiters by revision, so an applied revision wakes only
// those it satisfies.
type waitHeap []*waiter

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].rev < h[j].rev }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
