package state

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
)

// The state as it was at a past point (provisionctl status --at), built
// from the history of commits (store.Historian) over one view of the
// store now: each key written after the point reads as it was before the
// first of those writes, every other key as it is now. Nothing of it is
// in the engines: it is a function over store.Historian and store.Reader
// (docs/history.md, "The model as it was").

// PastPoint is the point a ViewAt State reads: a revision, and the time
// of its commit (zero when the revision has no history record).
type PastPoint struct {
	Rev  uint64
	Time time.Time
}

// PastError is a point ViewAt cannot rebuild: older than the history kept
// (pruned), or before a write whose history keeps only its key. It is a
// NotFound: the state asked for is not there to be read.
type PastError struct{ msg string }

func (e *PastError) Error() string { return e.msg }

// Is makes a PastError a juju/errors NotFound (its wire code).
func (e *PastError) Is(target error) bool { return target == errors.NotFound }

// pastAttempts bounds how often ViewAt reads the records committed while
// it read (see ViewAt) before it gives up with ErrStoreContention.
const pastAttempts = 50

// ViewAt runs fn with a State whose reads see the store as it was at a
// past point: revision rev (> 0), or, with rev 0, the time at (the last
// commit made at or before it). It refuses a point in the future (not
// valid) and one older than the history kept (a PastError naming the
// oldest point kept). The State fn is given only reads, as OneView's.
// fn's results are to be used only when ViewAt returns nil: the history
// may be pruned past the point while fn runs, and ViewAt then fails.
//
// Consistency: the records are read first, up to the revision this
// process had applied (and whatever else the store returns), then one
// view is taken; if it is newer than what was read, the records between
// are read and the view taken again (no read of the history happens
// inside a view: on bbolt a second read transaction of one goroutine can
// deadlock against a writer growing the file). So the view at revision N
// is undone by exactly the records after the point and up to N, each
// once.
func (st *State) ViewAt(ctx context.Context, rev uint64, at time.Time, fn func(*State, PastPoint) error) error {
	h, ok := st.store.(store.Historian)
	if !ok {
		return ErrNoHistory
	}
	latest := st.store.Revision()
	stats, err := h.HistoryStats(ctx)
	if err != nil {
		return err
	}
	var p PastPoint
	if rev > 0 {
		if rev > latest {
			return errors.NewNotValid(nil, fmt.Sprintf("revision %d is in the future: the latest is %d", rev, latest))
		}
		if p, err = pastRevision(ctx, h, stats, rev, latest); err != nil {
			return err
		}
	} else {
		if now := st.now(); at.After(now) {
			return errors.NewNotValid(nil, fmt.Sprintf("%s is in the future: the controller's time is %s",
				at.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339)))
		}
		if p, err = pastTime(ctx, h, stats, at, latest); err != nil {
			return err
		}
	}

	f := &pastFold{keys: map[string]*pastKey{}}
	var tail []store.Commit // read, not yet folded: after the revision applied when read
	after := p.Rev
	for attempt := 0; ; attempt++ {
		if attempt == pastAttempts {
			return errors.Annotatef(ErrStoreContention, "reading the history after revision %d", p.Rev)
		}
		applied := st.store.Revision()
		for more := true; more; {
			var last uint64
			last, more, err = h.History(ctx, after, 0, func(c store.Commit) error {
				tail = append(tail, c)
				return nil
			})
			if err != nil {
				return historyGone(ctx, h, fmt.Sprintf("revision %d", p.Rev), err)
			}
			after = max(after, last)
		}
		n := 0
		for _, c := range tail {
			if c.Rev > applied {
				break
			}
			f.add(c)
			n++
		}
		tail = tail[n:]
		covered := max(applied, after)
		err = st.store.View(ctx, func(r store.Reader) error {
			now := r.Revision()
			if now > covered {
				return errPastBehind
			}
			for _, c := range tail {
				if c.Rev <= now {
					f.add(c)
				}
			}
			past := *st
			past.store = pinnedStore{Store: st.store, r: f.reader(r, p.Rev)}
			return fn(&past, p)
		})
		if err == errPastBehind {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	// The history read may have been pruned under it: then it is not
	// the whole of what followed the point.
	if stats, err = h.HistoryStats(ctx); err != nil {
		return err
	}
	if stats.Oldest > p.Rev {
		return pastGone(fmt.Sprintf("revision %d", p.Rev), stats)
	}
	return nil
}

var errPastBehind = errors.New("the view is newer than the history read")

// historyGone returns err, a failed read of the history after point
// what, as the PastError naming the oldest point kept when the store
// says the history after the point is not all kept (records lost between
// it and the oldest point kept).
func historyGone(ctx context.Context, h store.Historian, what string, err error) error {
	if !errors.Is(err, store.ErrHistoryGone) {
		return err
	}
	stats, serr := h.HistoryStats(ctx)
	if serr != nil {
		return err
	}
	return pastGone(what, stats)
}

// pastGone is the PastError of a point older than the history kept.
func pastGone(what string, stats HistoryStats) error {
	if stats.Oldest == 0 {
		return &PastError{fmt.Sprintf("%s is not kept: no history is kept", what)}
	}
	return &PastError{fmt.Sprintf("%s is older than the history kept: the oldest point kept is revision %d (%s)",
		what, stats.Oldest, stats.OldestTime.UTC().Format(time.RFC3339))}
}

// pastRevision checks revision rev against the history kept and returns
// it with its commit's time.
func pastRevision(ctx context.Context, h store.Historian, stats HistoryStats, rev, latest uint64) (PastPoint, error) {
	p := PastPoint{Rev: rev}
	if rev < latest && (stats.Oldest == 0 || rev < stats.Oldest) {
		return p, pastGone(fmt.Sprintf("revision %d", rev), stats)
	}
	c, ok, err := firstRecord(ctx, h, rev-1)
	if err != nil {
		return p, err
	}
	if ok && c.Rev == rev {
		p.Time = c.Time
	}
	return p, nil
}

// pastTime returns the point of time at: the last commit made at or
// before it, found by bisecting the revisions kept (up to latest).
// Commit times are the committing daemons' clocks: across daemons whose
// clocks disagree, it is a commit made at or before at whose next commit
// was made after it.
func pastTime(ctx context.Context, h store.Historian, stats HistoryStats, at time.Time, latest uint64) (PastPoint, error) {
	if stats.Oldest == 0 || at.Before(stats.OldestTime) {
		return PastPoint{}, pastGone(at.UTC().Format(time.RFC3339Nano), stats)
	}
	// lo: a commit made at or before at; from hi on, none is.
	lo, hi := PastPoint{Rev: stats.Oldest, Time: stats.OldestTime}, latest+1
	for lo.Rev+1 < hi {
		mid := lo.Rev + 1 + (hi-lo.Rev-1)/2
		c, ok, err := firstRecord(ctx, h, mid-1)
		switch {
		case err != nil:
			return lo, err
		case !ok || c.Rev >= hi || c.Time.After(at):
			hi = mid
		default:
			lo = PastPoint{Rev: c.Rev, Time: c.Time}
		}
	}
	return lo, nil
}

// errStopRecord stops a History read after its first record.
var errStopRecord = errors.New("first record read")

// firstRecord returns the first history record after revision after.
func firstRecord(ctx context.Context, h store.Historian, after uint64) (store.Commit, bool, error) {
	var c store.Commit
	found := false
	for more := true; more && !found; {
		var last uint64
		var err error
		last, more, err = h.History(ctx, after, 1, func(cm store.Commit) error {
			c, found = cm, true
			return errStopRecord
		})
		if err != nil && err != errStopRecord {
			return c, false, err
		}
		if last <= after && !found {
			break
		}
		after = last
	}
	return c, found, nil
}

// pastKey is what the history says of one key at the point: the value
// before the first write after it that kept the value whole (whole), or,
// when every write after it changed members of a JSON object, those
// members' values before the first of them (members; the rest of the
// object is as the value before the first whole write, or as it is now).
type pastKey struct {
	whole   bool
	exists  bool   // whole: the key existed at the point
	value   []byte // whole and exists: its value before the patches of members
	elided  uint64 // the revision of a write whose history keeps only its key: the value is not known
	members []store.MemberChange
}

// pastFold gathers the records after the point, oldest first.
type pastFold struct {
	keys  map[string]*pastKey
	whole []string // the keys with whole or elided set, sorted once read
}

func (f *pastFold) add(c store.Commit) {
	for _, w := range c.Writes {
		k := f.keys[w.Key]
		if k == nil {
			k = &pastKey{}
			f.keys[w.Key] = k
		}
		if k.whole || k.elided != 0 {
			continue // what followed the first whole write changes nothing
		}
		switch w.Op {
		case store.Created:
			k.whole = true
		case store.Removed, store.Replaced:
			k.whole, k.exists, k.value = true, true, w.Before
		case store.Elided:
			k.elided = c.Rev
		case store.Patched:
			for _, m := range w.Members {
				if !slices.ContainsFunc(k.members, func(x store.MemberChange) bool { return x.Name == m.Name }) {
					k.members = append(k.members, store.MemberChange{Name: m.Name, Before: m.Before})
				}
			}
		}
		if k.whole || k.elided != 0 {
			f.whole = append(f.whole, w.Key)
		}
	}
}

// reader returns the Reader of the point rev over r, the view now.
func (f *pastFold) reader(r store.Reader, rev uint64) *pastReader {
	slices.Sort(f.whole)
	f.whole = slices.Compact(f.whole)
	return &pastReader{r: r, rev: rev, f: f, done: map[string][]byte{}}
}

// pastReader reads the store as it was: keys the fold knows as it says,
// the others as r (now).
type pastReader struct {
	r   store.Reader
	rev uint64
	f   *pastFold

	mu   sync.Mutex
	done map[string][]byte // values built, by key (nil: not there)
}

func (p *pastReader) Revision() uint64 { return p.rev }

// value returns key's value at the point, given its value now (cur, has).
func (p *pastReader) value(key string, cur []byte, has bool) ([]byte, bool, error) {
	k := p.f.keys[key]
	if k == nil {
		return cur, has, nil
	}
	if k.elided != 0 {
		return nil, false, &PastError{fmt.Sprintf("the history of revision %d keeps only that it wrote %s (the write was too large to keep): "+
			"the state before it cannot be rebuilt", k.elided, key)}
	}
	if k.whole {
		if !k.exists {
			return nil, false, nil
		}
		cur, has = k.value, true
	}
	if !has || len(k.members) == 0 {
		return cur, has, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.done[key]; ok {
		return v, true, nil
	}
	v, err := unpatch(cur, k.members)
	if err != nil {
		return nil, false, errors.Annotatef(err, "rebuilding %s at revision %d", key, p.rev)
	}
	p.done[key] = v
	return v, true, nil
}

// unpatch returns the JSON object cur with members set to their values
// before (absent: null, which decodes as an absent member does, so the
// stored record's own encoder is kept: patchRecord).
func unpatch(cur []byte, members []store.MemberChange) ([]byte, error) {
	set := make([]patchMember, len(members))
	for i, m := range members {
		set[i] = patchMember{key: m.Name, val: m.Before}
		if m.Before == nil {
			set[i].val = []byte("null")
		}
	}
	if out, ok := patchRecord(cur, set); ok {
		return out, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(cur, &obj); err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.Before == nil {
			delete(obj, m.Name)
		} else {
			obj[m.Name] = m.Before
		}
	}
	return json.Marshal(obj)
}

func (p *pastReader) Get(key string) ([]byte, bool, error) {
	cur, has, err := p.r.Get(key)
	if err != nil {
		return nil, false, err
	}
	return p.value(key, cur, has)
}

func (p *pastReader) GetFunc(key string, fn func([]byte)) (bool, error) {
	if p.f.keys[key] == nil {
		return p.r.GetFunc(key, fn)
	}
	v, ok, err := p.Get(key)
	if ok && err == nil {
		fn(v)
	}
	return ok, err
}

// Scan merges the keys now (r's) with the keys the fold knows whole (which
// may exist at the point and not now, or the reverse), in key order.
func (p *pastReader) Scan(prefix, start string, limit int, fn func(key string, val []byte) error) (string, bool, error) {
	if limit <= 0 || limit > store.MaxScan {
		limit = store.MaxScan
	}
	ws := p.f.whole
	i, _ := slices.BinarySearch(ws, max(prefix, start))
	for i < len(ws) && ws[i] <= start {
		i++
	}
	inPrefix := func(i int) bool { return i < len(ws) && strings.HasPrefix(ws[i], prefix) }
	type kv struct {
		k string
		v []byte
	}
	n, last, cursor := 0, start, start
	visit := func(key string, cur []byte, has bool) (bool, error) {
		v, ok, err := p.value(key, cur, has)
		if err != nil || !ok {
			return false, err
		}
		if err := fn(key, v); err != nil {
			return false, err
		}
		n++
		last = key
		return n == limit, nil
	}
	for {
		var page []kv
		ulast, umore, err := p.r.Scan(prefix, cursor, limit-n, func(k string, v []byte) error {
			page = append(page, kv{k, v})
			return nil
		})
		if err != nil {
			return last, false, err
		}
		j := 0
		for j < len(page) || inPrefix(i) && (!umore || ws[i] <= ulast) {
			var full bool
			switch {
			case j < len(page) && (!inPrefix(i) || page[j].k < ws[i]):
				full, err = visit(page[j].k, page[j].v, true)
				j++
			case j < len(page) && page[j].k == ws[i]:
				full, err = visit(page[j].k, page[j].v, true)
				i, j = i+1, j+1
			default:
				full, err = visit(ws[i], nil, false)
				i++
			}
			if err != nil {
				return last, false, err
			}
			if full {
				return last, j < len(page) || umore || inPrefix(i), nil
			}
		}
		if !umore {
			return last, false, nil
		}
		cursor = ulast
	}
}
