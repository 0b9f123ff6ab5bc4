package state

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

// The history window: the recent history shared by resumed watches. When
// a daemon fails, its agents resume their watchers on the others at once,
// each watcher (a bulk Watch call makes one per item) replaying the
// history after its revision, up to its snapshot's: thousands of reads
// of the same records from the store (on etcd, paged reads of etcd's
// history and of the archive). The window holds every commit in (lo, hi],
// as much of each as a replay needs (historyChange: the keys written, how,
// the members' names, the life after), read once from the store; a resume
// whose range falls inside it replays from it, and one that reaches past
// an end reads only what is missing there, one reader at a time, the
// others waiting for it and then served from what it added. Each read is
// checked as a lone replay's is (the records lost: ErrResumeTooOld; the
// oldest kept read after them), so the window holds only whole stretches
// of history; a resume served from it is exact even when the retention
// pruned some of its records since they were read. Bounded in bytes (the
// oldest commits go first) and in the revisions a read may span (a resume
// from further back reads alone, as without the window), and emptied once
// no resume has used it for windowIdle.

const (
	// windowMaxBytes bounds the window's commits (commitSize of what it
	// keeps of each).
	windowMaxBytes = 32 << 20
	// windowMaxSpan is the most revisions one read for the window may
	// span; a resume whose missing range is longer reads alone.
	windowMaxSpan = 200_000
	// windowIdle: the window is emptied after this long unused.
	windowIdle = time.Minute
)

// historyWindow is a State's window (shared by its copies). Its timer,
// started by the fill that makes it non-empty and stopped by close (State.Close),
// empties it when idle.
type historyWindow struct {
	// fill is held by the one resume reading the store for the window.
	fill chan struct{}

	mu      sync.Mutex
	lo, hi  uint64         // it holds every commit in (lo, hi]; lo == hi: none
	commits []store.Commit // in revision order; elements never change once in
	bytes   int
	used    time.Time
	filling bool   // a fill is reading the store
	want    uint64 // the lowest revision the resumes waiting for the fill resume from (0: none)
	timer   *time.Timer
	closed  bool
}

func newHistoryWindow() *historyWindow {
	return &historyWindow{fill: make(chan struct{}, 1)}
}

// replay calls fn with the commits in (from, upto], from the window or,
// for what it lacks, the store (counted in c); shared reports whether no
// store read was made. from < upto <= latest, the revision this process
// has applied: a read for the window goes on to it, and back to the
// lowest revision the resumes waiting for the read asked for, so that
// one read serves every resume that came meanwhile (their snapshots are
// at most latest).
func (w *historyWindow) replay(ctx context.Context, c *resumeCounters, h store.Historian, from, upto, latest uint64, fn func(store.Commit)) (shared bool, err error) {
	if cs, ok := w.get(from, upto); ok {
		visit(cs, fn)
		return true, nil
	}
	w.mu.Lock()
	if w.want == 0 || from < w.want {
		w.want = from
	}
	w.mu.Unlock()
	select {
	case w.fill <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-w.fill }()
	if cs, ok := w.get(from, upto); ok { // filled meanwhile
		visit(cs, fn)
		return true, nil
	}
	// Held by the fill (it alone changes the window, and expire leaves
	// it be meanwhile): mid's elements stay as they are, and appending to
	// mid writes past what any reader was given.
	w.mu.Lock()
	lo, hi, mid, bytes, want := w.lo, w.hi, w.commits, w.bytes, w.want
	w.want = 0
	w.filling = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.filling = false
		w.mu.Unlock()
	}()
	a, b := from, max(upto, latest)
	if want != 0 && want < a && b-want <= windowMaxSpan {
		a = want
	}
	err = w.fillRange(ctx, c, h, a, b, lo, hi, mid, bytes)
	if err == ErrResumeTooOld && a < from {
		// Another resume's revision is too old: this one's may not be.
		err = w.fillRange(ctx, c, h, from, b, lo, hi, mid, bytes)
	}
	if err == errTooLong {
		_, err = c.readHistory(ctx, h, from, upto, fn)
		return false, err
	}
	if err != nil {
		return false, err
	}
	cs, ok := w.get(from, upto)
	if !ok { // trimmed past from: it was a long read
		_, err = c.readHistory(ctx, h, from, upto, fn)
		return false, err
	}
	visit(cs, fn)
	return false, nil
}

// errTooLong: a read for the window would span more than windowMaxSpan.
var errTooLong = errors.New("state: too long a read for the history window")

// fillRange makes the window hold (a, b], given that it held (lo, hi] of
// mid (bytes): a new window when the two are apart, else the old one
// with what is missing read at either end. Called by the fill.
func (w *historyWindow) fillRange(ctx context.Context, c *resumeCounters, h store.Historian, a, b, lo, hi uint64, mid []store.Commit, bytes int) error {
	if lo == hi || a > hi || b < lo {
		if b-a > windowMaxSpan {
			return errTooLong
		}
		cs, oldest, err := readSlim(ctx, c, h, a, b)
		if err != nil {
			return err
		}
		w.store(a, b, cs, sizeOf(cs), oldest)
		return nil
	}
	if lo-min(lo, a) > windowMaxSpan || max(b, hi)-hi > windowMaxSpan {
		return errTooLong
	}
	var before, after []store.Commit
	var oldest uint64
	var err error
	if a < lo {
		if before, oldest, err = readSlim(ctx, c, h, a, lo); err != nil {
			return err
		}
	}
	if b > hi {
		// The newest commits, from what this process's feed brought when
		// it still holds them: while commits go on, every resume's
		// snapshot is past the window, and a read of the store for each
		// few revisions since would make each resume wait for one.
		var ok bool
		if after, ok, err = readRecent(ctx, c, h, hi, b); err != nil {
			return err
		}
		if !ok {
			if after, oldest, err = readSlim(ctx, c, h, hi, b); err != nil {
				return err
			}
		}
	}
	cs := mid
	if before != nil {
		cs = append(before, mid...)
	}
	cs = append(cs, after...)
	w.store(min(a, lo), max(b, hi), cs, bytes+sizeOf(before)+sizeOf(after), oldest)
	return nil
}

func visit(cs []store.Commit, fn func(store.Commit)) {
	for _, cm := range cs {
		fn(cm)
	}
}

// get returns the window's commits in (from, upto] if it holds all of
// them.
func (w *historyWindow) get(from, upto uint64) ([]store.Commit, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lo == w.hi || from < w.lo || upto > w.hi {
		return nil, false
	}
	w.used = time.Now()
	i := firstAfter(w.commits, from)
	j := firstAfter(w.commits, upto)
	return w.commits[i:j:j], true
}

// firstAfter is the index of the first of cs (in revision order) after
// revision rev.
func firstAfter(cs []store.Commit, rev uint64) int {
	lo, hi := 0, len(cs)
	for lo < hi {
		m := (lo + hi) / 2
		if cs[m].Rev <= rev {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// store makes the window (lo, hi] of cs (bytes: their size), then drops
// its oldest commits while it is over windowMaxBytes, and those before
// oldest, the oldest revision the store kept when it was read last (a
// resume from before it is refused, as the store would). Called by the
// fill.
func (w *historyWindow) store(lo, hi uint64, cs []store.Commit, bytes int, oldest uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.lo, w.hi, w.commits, w.bytes = lo, hi, cs, bytes
	for len(w.commits) > 0 && (w.bytes > windowMaxBytes || w.commits[0].Rev < oldest) {
		w.bytes -= commitSize(w.commits[0])
		w.lo = w.commits[0].Rev
		w.commits = w.commits[1:]
	}
	if oldest > 0 {
		w.lo = max(w.lo, oldest-1)
	}
	if w.lo >= w.hi {
		w.lo, w.hi, w.commits, w.bytes = 0, 0, nil, 0
	}
	w.used = time.Now()
	if w.timer == nil {
		w.timer = time.AfterFunc(windowIdle, w.expire)
	}
}

// expire empties the window when it has been idle for windowIdle, or
// waits again.
func (w *historyWindow) expire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if idle := time.Since(w.used); idle < windowIdle || w.filling {
		w.timer = time.AfterFunc(max(windowIdle-idle, time.Second), w.expire)
		return
	}
	w.lo, w.hi, w.commits, w.bytes, w.timer = 0, 0, nil, 0, nil
}

// close stops the timer and empties the window.
func (w *historyWindow) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.lo, w.hi, w.commits, w.bytes, w.timer = 0, 0, nil, 0, nil
}

func sizeOf(cs []store.Commit) int {
	n := 0
	for _, cm := range cs {
		n += commitSize(cm)
	}
	return n
}

// readSlim reads the commits in (from, upto] from the store, each as
// much as a replay needs (slim), and the oldest revision kept.
func readSlim(ctx context.Context, c *resumeCounters, h store.Historian, from, upto uint64) ([]store.Commit, uint64, error) {
	cs := []store.Commit{}
	oldest, err := c.readHistory(ctx, h, from, upto, func(cm store.Commit) { cs = append(cs, slim(cm)) })
	return cs, oldest, err
}

// readRecent reads the commits in (from, upto], each slim, from what the
// store holds in memory of the revisions its process applied last
// (store.RecentHistorian), if it holds all of them; ok false otherwise.
func readRecent(ctx context.Context, c *resumeCounters, h store.Historian, from, upto uint64) (cs []store.Commit, ok bool, err error) {
	rh, is := h.(store.RecentHistorian)
	if !is {
		return nil, false, nil
	}
	cs = []store.Commit{}
	ok, err = rh.RecentHistory(ctx, from, upto, func(cm store.Commit) error {
		cs = append(cs, slim(cm))
		return nil
	})
	if err != nil || !ok {
		return nil, false, err
	}
	c.recent.Add(1)
	return cs, true, nil
}

// slim is what a replay needs of cm (historyChange): its revision, and of
// each write its key, how it was written and the names of the members it
// changed, with the life after. Copied: a store's commit may point into
// memory that is its only while it is read (bbolt's pages).
func slim(cm store.Commit) store.Commit {
	out := store.Commit{Rev: cm.Rev, Writes: make([]store.Write, len(cm.Writes))}
	for i, wr := range cm.Writes {
		sw := store.Write{Key: strings.Clone(wr.Key), Op: wr.Op}
		if len(wr.Members) > 0 {
			sw.Members = make([]store.MemberChange, len(wr.Members))
			for j, m := range wr.Members {
				sw.Members[j].Name = strings.Clone(m.Name)
				if m.Name == "life" {
					sw.Members[j].After = append([]byte(nil), m.After...)
				}
			}
		}
		out.Writes[i] = sw
	}
	return out
}
