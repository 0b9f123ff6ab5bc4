package etcdstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/watcher"
)

// Group commit (see "Writes: group commit" in the package documentation).
//
// At most Config.CommitsInFlight etcd transactions of Updates are in flight. An Update
// that finds fewer sends its commit at once, alone; the others queue. When
// a transaction returns, the Update that sent it hands the queue on: the
// first queued proposal's Update sends it, with every other queued proposal
// that can share its transaction, as one etcd transaction of nested ones.
// No goroutine of its own: the Updates waiting anyway take the turns.

// DefaultCommitsInFlight is Config.CommitsInFlight's default. Four keep
// etcd's raft pipeline busy (its proposals of one moment share a log
// append and an fsync) while groups under load grow large enough to cut
// etcd's work per write. Measured through the daemon (provisionbench
// write --store etcd, 64 and 256 writers, alternated runs): on an idle
// box four did 15% more writes at 64 writers than one and the same at
// 256; on a loaded box one cost less CPU per write (larger groups), but a
// lone transaction in flight makes every write that comes meanwhile wait
// for it, which a watcher sees as latency. --etcd-commits-in-flight sets
// it (docs/scale-out.md).
const DefaultCommitsInFlight = 4

// proposal is the commit of one run of an Update function.
type proposal struct {
	cmps    []clientv3.Cmp
	ops     []clientv3.Op    // the writes, without the feed key
	cs      []byte           // the encoded change set
	changes []watcher.Change // ... as the function recorded it (applyOwn)
	size    int              // bytes of compares and writes, about
	guard   bool             // cmps is the one guard compare of the feed key
	writes  []string         // etcd keys written
	reads   []string         // etcd keys compared
	ranges  [][2]string      // etcd key ranges compared
	witness string           // store key of the least put: proves the proposal's part applied
	snapRev int64            // revision of the function's snapshot

	res chan outcome // while queued: its turn to send (lead) or its outcome
}

// opc is what etcd counts of the proposal as a nested transaction.
func (p *proposal) opc() int { return max(len(p.cmps), len(p.ops), 1) }

// outcome is what became of a proposal's commit.
type outcome struct {
	lead   []*proposal // not nil: the receiver is to send this group (itself first)
	doomed []*proposal // with lead: proposals that read what the group writes
	ok     bool        // committed at rev
	rev    int64       // ok: the commit's revision; else the revision to wait for before running again
	err    error       // the etcd client's error: not known to be committed
}

// committer is the store's group commit: the queue and the count in flight.
type committer struct {
	mu       sync.Mutex
	inflight int
	queue    []*proposal // not empty only while inflight == CommitsInFlight
}

// propose commits p, alone or in a group, and says what became of it.
func (s *Store) propose(ctx context.Context, p *proposal) outcome {
	c := &s.group
	c.mu.Lock()
	if c.inflight < s.cfg.CommitsInFlight {
		c.inflight++
		c.mu.Unlock()
		return s.lead(ctx, []*proposal{p}, nil, p)
	}
	p.res = make(chan outcome, 1)
	c.queue = append(c.queue, p)
	c.mu.Unlock()
	// Bounded: the transactions in flight are (RequestTimeout each), and
	// each that returns sends what can go of the queue.
	o := <-p.res
	if o.lead != nil {
		return s.lead(ctx, o.lead, o.doomed, p)
	}
	return o
}

// lead sends group (self among it), hands the queue on and delivers the
// other members' outcomes.
func (s *Store) lead(ctx context.Context, group, doomed []*proposal, self *proposal) outcome {
	var outs []outcome
	if len(group) == 1 {
		outs = []outcome{s.sendOne(ctx, group[0])}
	} else {
		outs = s.sendGroup(group)
	}
	c := &s.group
	c.mu.Lock()
	if len(c.queue) > 0 {
		next, nextDoomed := s.take()
		c.mu.Unlock()
		next[0].res <- outcome{lead: next, doomed: nextDoomed}
	} else {
		c.inflight--
		c.mu.Unlock()
	}
	s.applyOwnOutcomes(group, outs)
	var mine outcome
	rev := int64(0)
	for i, m := range group {
		if outs[i].ok {
			rev = max(rev, outs[i].rev)
		}
		if m == self {
			mine = outs[i]
		} else {
			m.res <- outs[i]
		}
	}
	// The doomed read what a member wrote: refused, whatever their
	// compares, once it committed; they run again after it.
	for _, d := range doomed {
		switch {
		case rev > 0:
			d.res <- outcome{rev: rev}
		case outs[0].err != nil:
			d.res <- outcome{err: outs[0].err}
		default:
			// Nothing of the group committed: nothing to wait for, the
			// doomed run again at once (and may commit this time).
			d.res <- outcome{rev: d.snapRev}
		}
	}
	return mine
}

// take removes from the queue (c.mu held) its first proposal and every
// later one that can share its transaction: within etcd's limits, and
// independent of the others. A proposal that read or scanned what another
// writes, or writes what another writes, waits for a later transaction:
// etcd evaluates every compare of a transaction before applying any of its
// writes, so two dependent proposals in one would not see each other. A
// guard proposal (its read set is everything) and one that puts nothing
// (nothing would prove its part applied) go alone. A proposal that read
// what the group writes is doomed: its compares would fail once the group
// commits, so it is not sent but told to run again then.
func (s *Store) take() (group, doomed []*proposal) {
	c := &s.group
	q := c.queue
	first := q[0]
	group = []*proposal{first}
	rest := q[:0]
	if !first.groupable() {
		c.queue = append(rest, q[1:]...)
		return group, nil
	}
	written := make(map[string]struct{}, 4*len(q))
	read := make(map[string]struct{}, 4*len(q))
	var ranges [][2]string
	add := func(p *proposal) {
		for _, k := range p.writes {
			written[k] = struct{}{}
		}
		for _, k := range p.reads {
			read[k] = struct{}{}
		}
		ranges = append(ranges, p.ranges...)
	}
	add(first)
	maxOpc, size := first.opc(), first.size+len(first.cs)
	for _, p := range q[1:] {
		n := len(group) + 1
		// The outer transaction: n nested ones and the feed put; etcd
		// allows each nested one MaxTxnOps less the outer's count.
		if readsWritten(p, written) {
			doomed = append(doomed, p)
			continue
		}
		fits := p.groupable() &&
			n+1+max(maxOpc, p.opc()) <= s.cfg.MaxTxnOps &&
			size+p.size+len(p.cs)+len(p.witness)+64*n+len(s.feedK) <= s.cfg.MaxRequestBytes &&
			writesFree(p, written, read, ranges)
		if !fits {
			rest = append(rest, p)
			continue
		}
		group = append(group, p)
		add(p)
		maxOpc = max(maxOpc, p.opc())
		size += p.size + len(p.cs) + len(p.witness) + 64
	}
	clear(q[len(rest):])
	c.queue = rest
	return group, doomed
}

// readsWritten says whether p read or scanned a key the group writes.
func readsWritten(p *proposal, written map[string]struct{}) bool {
	for _, k := range p.reads {
		if _, ok := written[k]; ok {
			return true
		}
	}
	for _, r := range p.ranges {
		for k := range written {
			if k >= r[0] && k < r[1] {
				return true
			}
		}
	}
	return false
}

func (p *proposal) groupable() bool { return !p.guard && p.witness != "" }

// writesFree says whether p writes nothing the group writes, reads or
// scanned (what p read is readsWritten's, checked before).
func writesFree(p *proposal, written, read map[string]struct{}, ranges [][2]string) bool {
	for _, k := range p.writes {
		if _, ok := written[k]; ok {
			return false
		}
		if _, ok := read[k]; ok {
			return false
		}
		for _, r := range ranges {
			if k >= r[0] && k < r[1] {
				return false
			}
		}
	}
	return true
}

// sendOne commits one proposal as one etcd transaction, under the
// caller's context: If(its compares) Then(its writes, the feed put) Else
// (read the feed key).
func (s *Store) sendOne(ctx context.Context, p *proposal) outcome {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	// On a conflict, the Else reads the feed key: the revision to wait
	// for is that of our latest commit, not the cluster's revision, which
	// writes outside the prefix move too (other controllers on the same
	// etcd) and which this process's watch of the prefix may never reach.
	// p.ops has room for the feed put (commit): appending writes past
	// its length, which nothing else reads, the same Op each time.
	ops := append(p.ops, opPut(s.feedK, p.cs))
	start := time.Now()
	resp, err := s.cli.Txn(rctx).If(p.cmps...).Then(ops...).Else(clientv3.OpGet(s.feedK, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return outcome{err: err}
	}
	if resp.Succeeded {
		s.observeCommit(start, 1)
		return outcome{ok: true, rev: resp.Header.Revision}
	}
	return outcome{rev: conflictRevision(resp.Responses, p.snapRev)}
}

// sendGroup commits several proposals as one etcd transaction without
// compares of its own: each proposal a nested transaction (its compares,
// its writes; else the read of the feed key), then the feed put of the
// group's change sets, each with its witness. The context is the store's,
// not one member's: the commit is every member's.
func (s *Store) sendGroup(group []*proposal) []outcome {
	then := make([]clientv3.Op, 0, len(group)+1)
	elseOp := []clientv3.Op{clientv3.OpGet(s.feedK, clientv3.WithKeysOnly())}
	for _, p := range group {
		then = append(then, clientv3.OpTxn(p.cmps, p.ops, elseOp))
	}
	then = append(then, opPut(s.feedK, encodeGroup(group)))
	rctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	start := time.Now()
	resp, err := s.cli.Txn(rctx).Then(then...).Commit()
	cancel()
	outs := make([]outcome, len(group))
	if err != nil {
		if refusedUnapplied(err) {
			// etcd refused the whole before applying any of it (a limit
			// reckoned wrong here): each member on its own.
			for i, p := range group {
				outs[i] = s.sendOne(s.ctx, p)
			}
			return outs
		}
		for i := range outs {
			outs[i] = outcome{err: err}
		}
		return outs
	}
	s.stats.groups.Add(1)
	s.stats.grouped.Add(uint64(len(group)))
	committed := 0
	defer func() { s.observeCommit(start, committed) }()
	for i, p := range group {
		var nested *clientv3.TxnResponse
		if i < len(resp.Responses) {
			if t := resp.Responses[i].GetResponseTxn(); t != nil {
				nested = (*clientv3.TxnResponse)(t)
			}
		}
		switch {
		case nested == nil:
			outs[i] = outcome{err: errors.New("etcdstore: group commit answered without the member's response")}
		case nested.Succeeded:
			outs[i] = outcome{ok: true, rev: resp.Header.Revision}
			committed++
		default:
			outs[i] = outcome{rev: conflictRevision(nested.Responses, p.snapRev)}
		}
	}
	return outs
}

// observeCommit tells Config.ObserveCommit of a transaction sent at start
// that committed the writes of n Updates (none: nothing to tell).
func (s *Store) observeCommit(start time.Time, n int) {
	if s.cfg.ObserveCommit != nil && n > 0 {
		s.cfg.ObserveCommit(time.Since(start), n)
	}
}

// refusedUnapplied says whether etcd refused a transaction for its shape
// (checked before it is proposed, so nothing of it was applied).
func refusedUnapplied(err error) bool {
	for _, e := range []error{rpctypes.ErrTooManyOps, rpctypes.ErrGRPCTooManyOps,
		rpctypes.ErrRequestTooLarge, rpctypes.ErrGRPCRequestTooLarge,
		rpctypes.ErrDuplicateKey, rpctypes.ErrGRPCDuplicateKey} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
