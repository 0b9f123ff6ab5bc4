package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unsafe"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/provisiond/provisiond/state/internal/failpoint"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// maxAttempts bounds how often Update runs its function when its commit
// keeps meeting conflicting writers.
const maxAttempts = 100

// reader is a read view of one snapshot.
type reader struct{ snap *snapshot }

func (r *reader) Revision() uint64 { return uint64(r.snap.rev) }

func (r *reader) Get(key string) ([]byte, bool, error) {
	it, ok := r.snap.tree.Get(item{key: key})
	return it.val, ok, nil
}

func (r *reader) GetFunc(key string, fn func([]byte)) (bool, error) {
	it, ok := r.snap.tree.Get(item{key: key})
	if ok {
		fn(it.val)
	}
	return ok, nil
}

func (r *reader) Scan(prefix, start string, limit int, fn func(string, []byte) error) (string, bool, error) {
	return scan(r.snap, nil, prefix, start, limit, fn, nil)
}

// scanLower is the first key a scan of prefix after start may visit.
func scanLower(prefix, start string) string {
	if start >= prefix {
		return start + "\x00"
	}
	return prefix
}

// scan visits, in key order, the keys with prefix after start of the
// snapshot overlaid with a transaction's buffered writes (nil for a
// view), at most limit of them. seen, if set, is told each snapshot key
// visited (or peeked at to answer "more"), with its mod revision.
func scan(snap *snapshot, writes map[string]*write, prefix, start string, limit int,
	fn func(string, []byte) error, seen func(key string, mod int64)) (last string, more bool, err error) {
	if limit <= 0 || limit > store.MaxScan {
		limit = store.MaxScan
	}
	lower := scanLower(prefix, start)
	var buffered []string
	for k := range writes {
		if k >= lower && strings.HasPrefix(k, prefix) {
			buffered = append(buffered, k)
		}
	}
	slices.Sort(buffered)
	visited, bi := 0, 0
	stopped := false
	// emit visits one key of the result; false stops the scan.
	emit := func(k string, v []byte) bool {
		if visited == limit {
			more = true
			return false
		}
		visited++
		last = k
		if err = fn(k, v); err != nil {
			return false
		}
		return true
	}
	// flush emits the buffered keys before key ("" for all).
	flush := func(key string) bool {
		for bi < len(buffered) && (key == "" || buffered[bi] < key) {
			k := buffered[bi]
			bi++
			if w := writes[k]; !w.del && !emit(k, w.val) {
				return false
			}
		}
		return true
	}
	snap.tree.AscendGreaterOrEqual(item{key: lower}, func(it item) bool {
		if !strings.HasPrefix(it.key, prefix) {
			return false
		}
		if !flush(it.key) {
			stopped = true
			return false
		}
		if bi < len(buffered) && buffered[bi] == it.key {
			bi++
			if w := writes[it.key]; !w.del && !emit(it.key, w.val) {
				stopped = true
				return false
			}
			return true
		}
		if seen != nil {
			seen(it.key, it.mod)
		}
		if !emit(it.key, it.val) {
			stopped = true
			return false
		}
		return true
	})
	if !stopped {
		flush("")
	}
	return last, more, err
}

// write is a buffered write of a transaction.
type write struct {
	val []byte
	del bool
}

// undo restores a key's buffered write as it was before a write inside a
// Nest (prev nil: the key had none).
type undo struct {
	key  string
	prev *write
}

// txn is one run of an Update function: reads of a snapshot overlaid with
// the buffered writes, and the read set that validates them at commit.
type txn struct {
	s       *Store
	snap    *snapshot
	writes  map[string]*write
	changes []watcher.Change
	reads   map[string]int64 // snapshot keys read, with the mod revision seen (0: absent)
	ranges  [][2]string      // etcd key ranges [from, to) scanned
	depth   int              // Nest depth
	undos   []undo           // writes made inside Nest, to undo
	done    bool
	origin  store.Origin // on whose behalf (the Update's context)
}

var errTxnDone = errors.New("etcdstore: transaction used after its function returned")

func (t *txn) Revision() uint64 { return uint64(t.snap.rev) }

func (t *txn) read(key string, mod int64) {
	if t.reads == nil {
		t.reads = make(map[string]int64, 4)
	}
	if _, ok := t.reads[key]; !ok {
		t.reads[key] = mod
	}
}

func (t *txn) Get(key string) ([]byte, bool, error) {
	if t.done {
		return nil, false, errTxnDone
	}
	if w, ok := t.writes[key]; ok {
		if w.del {
			return nil, false, nil
		}
		return w.val, true, nil
	}
	it, ok := t.snap.tree.Get(item{key: key})
	t.read(key, it.mod)
	return it.val, ok, nil
}

func (t *txn) GetFunc(key string, fn func([]byte)) (bool, error) {
	v, ok, err := t.Get(key)
	if ok {
		fn(v)
	}
	return ok, err
}

func (t *txn) Scan(prefix, start string, limit int, fn func(string, []byte) error) (string, bool, error) {
	if t.done {
		return "", false, errTxnDone
	}
	last, more, err := scan(t.snap, t.writes, prefix, start, limit, fn, t.read)
	// The range the scan covered: up to its last key when it stopped
	// early, to the end of the prefix when it did not. A key put in it
	// since the snapshot has a newer mod revision; one removed is among
	// the keys read.
	from := t.s.prefix + scanLower(prefix, start)
	var to string
	if more || err != nil {
		to = t.s.prefix + last + "\x00"
	} else {
		to = clientv3.GetPrefixRangeEnd(t.s.prefix + prefix)
	}
	if from < to {
		t.addRange(from, to)
	}
	return last, more, err
}

// addRange records a scanned range, leaving out the store's own meta keys
// (the feed key changes at every commit: a scan over it would conflict
// with every writer).
func (t *txn) addRange(from, to string) {
	metaFrom := t.s.prefix + store.MetaKind + "/"
	metaTo := clientv3.GetPrefixRangeEnd(metaFrom)
	if from < metaTo && to > metaFrom {
		if from < metaFrom {
			t.ranges = append(t.ranges, [2]string{from, metaFrom})
		}
		if to > metaTo {
			t.ranges = append(t.ranges, [2]string{metaTo, to})
		}
		return
	}
	t.ranges = append(t.ranges, [2]string{from, to})
}

func (t *txn) set(key string, w *write) error {
	if t.done {
		return errTxnDone
	}
	if err := store.CheckKey(key); err != nil {
		return err
	}
	if t.writes == nil {
		t.writes = make(map[string]*write, 4)
	}
	if t.depth > 0 {
		t.undos = append(t.undos, undo{key: key, prev: t.writes[key]})
	}
	t.writes[key] = w
	return nil
}

func (t *txn) Put(key string, val []byte) error {
	v := bytes.Clone(val)
	if v == nil {
		v = []byte{}
	}
	return t.set(key, &write{val: v})
}

func (t *txn) Delete(key string) error { return t.set(key, &write{del: true}) }

func (t *txn) Record(c watcher.Change) {
	if !t.done {
		t.changes = append(t.changes, c)
	}
}

func (t *txn) Nest(fn func() error) error {
	mark, cmark := len(t.undos), len(t.changes)
	t.depth++
	err := fn()
	t.depth--
	if err != nil {
		for i := len(t.undos) - 1; i >= mark; i-- {
			u := t.undos[i]
			if u.prev == nil {
				delete(t.writes, u.key)
			} else {
				t.writes[u.key] = u.prev
			}
		}
		t.undos = t.undos[:mark]
		t.changes = t.changes[:cmark]
	} else if t.depth == 0 {
		t.undos = t.undos[:0]
	}
	return err
}

// commit builds the proposal of t: the compares of its read set (or the
// one guard compare, when they would exceed MaxTxnOps) and its writes with
// the change set. It is nil when t writes nothing.
func (t *txn) commit() (*proposal, error) {
	if len(t.writes) == 0 {
		return nil, nil
	}
	s := t.s
	p := &proposal{snapRev: t.snap.rev}
	p.ops = make([]clientv3.Op, 0, len(t.writes)+1) // room for sendOne's feed put
	p.writes = make([]string, 0, len(t.writes))
	// The history record: each key's value before is the snapshot's
	// (see history.go for what that means for a key written unread).
	hist := store.AppendCommitHead(make([]byte, 0, 256), time.Now(), t.origin)
	// In key order, as bbolt applies them: the record lists them so.
	keys := make([]string, 0, len(t.writes))
	for k := range t.writes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w := t.writes[k]
		ek := s.prefix + k
		before, had := t.snap.tree.Get(item{key: k})
		if w.del {
			if !had {
				continue // removing what is not there writes nothing
			}
			hist = store.AppendWrite(hist, k, before.val, true, nil, false)
			p.ops = append(p.ops, clientv3.OpDelete(ek))
			p.writes = append(p.writes, ek)
			p.size += len(s.prefix) + len(k) + 16
			continue
		}
		hist = store.AppendWrite(hist, k, before.val, had, w.val, true)
		p.ops = append(p.ops, opPut(ek, w.val))
		p.writes = append(p.writes, ek)
		p.size += len(s.prefix) + len(k) + len(w.val) + 16
		if p.witness == "" || k < p.witness {
			p.witness = k
		}
	}
	if len(p.ops) == 0 {
		return nil, nil
	}
	if p.size+len(s.feedK)+store.ChangesSize(t.changes)+len(hist)+16 > s.cfg.MaxRequestBytes {
		// The writes alone fit, or are refused below: the history keeps
		// which keys they were, not what they did.
		hist = store.AppendCommitHead(hist[:0], time.Now(), t.origin)
		for _, ek := range p.writes {
			hist = store.AppendElided(hist, ek[len(s.prefix):])
		}
	}
	p.cs, p.changes = encodeFeed(t.changes, hist), t.changes
	size := p.size + len(s.feedK) + len(p.cs) + 16
	if len(p.ops)+1 > s.cfg.MaxTxnOps {
		return nil, fmt.Errorf("etcdstore: %w: %d writes, etcd allows %d operations per transaction (MaxTxnOps; etcd's --max-txn-ops)",
			store.ErrTooLarge, len(p.ops), s.cfg.MaxTxnOps)
	}
	if size > s.cfg.MaxRequestBytes {
		return nil, fmt.Errorf("etcdstore: %w: %d bytes of writes, etcd allows requests of %d (MaxRequestBytes; etcd's --max-request-bytes)",
			store.ErrTooLarge, size, s.cfg.MaxRequestBytes)
	}
	if len(t.reads)+len(t.ranges) > s.cfg.MaxTxnOps {
		// Too many compares: guard with the feed key, which every commit
		// of ours writes. It refuses the commit if anything of ours was
		// committed since the snapshot (a false conflict when it touched
		// nothing we read, which costs a re-run); only a removal by lease
		// expiry of an ephemeral key read escapes it.
		p.guard = true
		p.cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.feedK), "=", t.snap.feedMod)}
		p.size += len(s.feedK) + 16
		return p, nil
	}
	p.cmps = make([]clientv3.Cmp, 0, len(t.reads)+len(t.ranges))
	p.reads = make([]string, 0, len(t.reads))
	for k, mod := range t.reads {
		p.cmps = append(p.cmps, clientv3.Compare(clientv3.ModRevision(s.prefix+k), "=", mod))
		p.reads = append(p.reads, s.prefix+k)
		p.size += len(s.prefix) + len(k) + 16
	}
	for _, r := range t.ranges {
		p.cmps = append(p.cmps, clientv3.Compare(clientv3.ModRevision(r[0]), "<", t.snap.rev+1).WithRange(r[1]))
		p.size += len(r[0]) + len(r[1]) + 16
	}
	p.ranges = t.ranges
	return p, nil
}

// opPut is clientv3.OpPut of a value that nothing changes any more (a
// transaction's buffered write, which Put copied; an encoded change set):
// OpPut copies the value into the Op itself, so converting it to a string
// first would copy it twice.
func opPut(key string, val []byte) clientv3.Op {
	return clientv3.OpPut(key, unsafe.String(unsafe.SliceData(val), len(val)))
}

// Update implements store.Store (see the package documentation).
func (s *Store) Update(ctx context.Context, fn func(store.Txn) error) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	origin := store.OriginOf(ctx)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if err := s.fresh(); err != nil {
			return 0, err
		}
		snap := s.snap.Load()
		t := &txn{s: s, snap: snap, origin: origin}
		err := fn(t)
		t.done = true
		if err != nil {
			return 0, err
		}
		p, err := t.commit()
		if err != nil {
			return 0, err
		}
		if p == nil {
			return uint64(snap.rev), nil
		}
		if failpoint.Enabled && failpoint.Eval("store/commit") == failpoint.Early {
			return s.commitLate(p, snap)
		}
		o := s.propose(ctx, p)
		if o.err != nil {
			return 0, s.fail(ctx, "commit", o.err)
		}
		if o.ok {
			if failpoint.Enabled {
				failpoint.Eval("store/reply")
			}
			// Durable (a quorum has it); return once this process has
			// applied it, whatever the caller's context says now.
			if err := s.waitLocal(ctx, o.rev); err != nil {
				return 0, fmt.Errorf("etcdstore: %w: committed at revision %d but not applied by this process: %w",
					store.ErrUnavailable, o.rev, err)
			}
			return uint64(o.rev), nil
		}
		s.stats.conflicts.Add(1)
		if attempt == maxAttempts {
			s.stats.contentions.Add(1)
			return 0, fmt.Errorf("etcdstore: %w: %d attempts conflicted with other writers", store.ErrContention, attempt)
		}
		// Run again once the replica has what the compare saw: our
		// latest commit, and in any case a revision of the prefix after
		// the snapshot (what conflicted may be a lease's expiry, which
		// writes no feed key; its deletion is in the prefix and comes).
		if err := s.waitLocal(ctx, o.rev); err != nil {
			return 0, fmt.Errorf("etcdstore: %w: waiting for revision %d: %w", store.ErrUnavailable, o.rev, err)
		}
		if attempt > 1 {
			// Writers that keep colliding spread out: a random pause of
			// up to 2^attempt * 50 µs, at most 50 ms.
			d := time.Duration(rand.Int64N(int64(min(time.Duration(50<<min(attempt, 20))*time.Microsecond, 50*time.Millisecond))))
			tm := time.NewTimer(d)
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				return 0, ctx.Err()
			}
		}
	}
}

// conflictRevision is the revision a refused commit waits for before its
// function runs again: the feed key's mod revision that the Else of the
// commit read, and at least the revision after the snapshot's.
func conflictRevision(resps []*etcdserverpb.ResponseOp, snapRev int64) int64 {
	rev := snapRev + 1
	for _, r := range resps {
		if rr := r.GetResponseRange(); rr != nil {
			for _, kv := range rr.Kvs {
				rev = max(rev, kv.ModRevision)
			}
		}
	}
	return rev
}

// waitLocal waits, at most RequestTimeout and regardless of ctx's
// cancellation, for this process to apply rev.
func (s *Store) waitLocal(ctx context.Context, rev int64) error {
	if s.applied.Load() >= rev {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	return s.waitApplied(wctx, rev)
}

// fail translates an error of the etcd client: the caller's own context
// ending stays that; etcd's transaction limits are store.ErrTooLarge;
// etcd's space quota reached is store.ErrNoSpace (and ErrUnavailable);
// anything else (no leader, unreachable, timed out, auth) is
// store.ErrUnavailable with the cause.
func (s *Store) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("etcdstore: %s: %w", what, ctx.Err())
	}
	if errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) {
		return noSpaceError{fmt.Sprintf("etcdstore: %s: etcd's database reached its space quota (its NOSPACE alarm is raised) and etcd refuses writes until space is freed: %s",
			what, noSpaceRecovery)}
	}
	if errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrGRPCTooManyOps) {
		return fmt.Errorf("etcdstore: %s: %w: %v (raise etcd's --max-txn-ops, and the store's MaxTxnOps to match)",
			what, store.ErrTooLarge, err)
	}
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) ||
		status.Code(err) == codes.ResourceExhausted {
		return fmt.Errorf("etcdstore: %s: %w: %v (raise etcd's --max-request-bytes, and the store's MaxRequestBytes to match)",
			what, store.ErrTooLarge, err)
	}
	return fmt.Errorf("etcdstore: %s: %w: %w", what, store.ErrUnavailable, err)
}

// unavailable wraps an error of connecting.
func unavailable(err error) error { return fmt.Errorf("%w: %w", store.ErrUnavailable, err) }
