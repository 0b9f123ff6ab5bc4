package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// A resumed watch (docs/history.md, "Resuming a watch"): a client that
// remembers the revision up to which a watcher's events covered every
// change may open the watcher again, after a reconnection to this or
// another daemon, "from" that revision. The watcher is subscribed first,
// as any; then, instead of the whole snapshot as its initial event, its
// initial event is every entity the history records changing after the
// revision, up to the revision of the snapshot it stamps with
// (watch_stamp.go): what is at or below the stamp comes from the history,
// what is after it from the feed, so nothing is missed and nothing is
// seen twice. The snapshot is still read, for the watcher's own
// bookkeeping (a lifecycle watcher's known ids), not reported.
//
// The history keeps writes of keys, not the changes state records with
// them, so an entity's write is taken as a change of whichever of the
// watcher's fields it may be: created and removed (the key's), life (the
// member "life"), and for any other member every other field the watcher
// asks for. So a resumed watcher may report an entity its live
// subscription would not have (a spurious event, which the watcher
// contract allows), never miss one.

// ResumeKey is the context key under which a Watch call's Resume is
// found: ctx.Value(ResumeKey{}) returns a Resume. The facade layer answers
// it from the request (provisiond's own "from-revision" header key).
type ResumeKey struct{}

// Resume is what a Watch call asks of the watcher it makes and is told
// back.
type Resume interface {
	// From is the revision to resume after; 0 asks for a fresh watcher
	// whose events report revisions.
	From() uint64
	// Covered is told the revision up to which the watcher's initial
	// event covers every change.
	Covered(rev uint64)
}

// ErrResumeTooOld is returned by a Watch call asked to resume after a
// revision whose history is no longer kept (older than the oldest
// record, pruned or compacted away): the client watches again from
// scratch. It is a watcher.ErrReset.
var ErrResumeTooOld = fmt.Errorf("%w (resuming after a revision older than the history kept)", watcher.ErrReset)

// resumeOf returns the Resume ctx carries, if any.
func resumeOf(ctx context.Context) Resume {
	rs, _ := ctx.Value(ResumeKey{}).(Resume)
	return rs
}

// viewResumable is viewStamped for a watcher that can resume: fn reads
// the snapshot and returns the watcher's initial event. Asked to resume
// (a Resume with From > 0), the initial event is instead what the
// history holds after From up to the snapshot's revision: each write of
// an entity one of fs may select is made a change (historyChange) and
// handed to id, which returns the id to report, if any; each id is
// reported once, in the order first seen. A call that carries a Resume
// is told the snapshot's revision, and the watcher's events report
// revisions (watcher.Strings.SetRevisioned).
func (st *State) viewResumable(ctx context.Context, s *stamper, w *watcher.Strings, fs []watcher.Filter, fn func(r reader) ([]string, error), id func(c watcher.Change) (string, bool)) ([]string, error) {
	rs := resumeOf(ctx)
	st.beforeSnapshot(ctx)
	var rev uint64
	var initial []string
	err := st.view(ctx, func(r reader) error {
		rev = r.Revision()
		var err error
		initial, err = fn(r)
		return err
	})
	if err != nil {
		return nil, err
	}
	if rs != nil && rs.From() > 0 {
		if initial, err = st.replay(ctx, rs.From(), rev, fs, id); err != nil {
			return nil, err
		}
	}
	s.Stamp(rev)
	if rs != nil {
		w.SetRevisioned()
		rs.Covered(rev)
	}
	return initial, nil
}

// resumeNotify is viewResumable for a notify watcher, once w is stamped
// with s's revision: asked to resume, w is triggered if the history
// holds a write after From, up to that revision, of something fs may
// select (the watcher then has one event pending, which its client's
// first Next takes), and left with none otherwise. The live API servers'
// records are ephemeral, kept by no history: a watcher of them is
// triggered whenever it resumes (its client reads them again). A call
// that carries a Resume is told the revision, and the watcher's events
// report revisions.
func (st *State) resumeNotify(ctx context.Context, s *stamper, w *watcher.Notify, fs ...watcher.Filter) error {
	rs := resumeOf(ctx)
	if rs == nil {
		return nil
	}
	rev := s.stamped()
	if rs.From() > 0 {
		changed, err := st.replay(ctx, rs.From(), rev, fs, func(watcher.Change) (string, bool) { return "", true })
		if err != nil {
			return err
		}
		if len(changed) > 0 || slices.ContainsFunc(fs, func(f watcher.Filter) bool { return f.Kind == KindAPIServer }) {
			w.Trigger()
		}
	}
	w.SetRevisioned()
	rs.Covered(rev)
	return nil
}

// beforeSnapshot runs between a watcher's subscription and its snapshot:
// a Watch call resuming after a revision this process has not applied yet
// waits for it (awaitResumePoint); afterSubscribe, if set (tests), runs.
func (st *State) beforeSnapshot(ctx context.Context) {
	if rs := resumeOf(ctx); rs != nil && rs.From() > st.store.Revision() {
		st.awaitResumePoint(ctx, rs.From())
	}
	if st.afterSubscribe != nil {
		st.afterSubscribe()
	}
}

// resumeWait bounds how long a resumed Watch call waits for this daemon
// to apply the revision it resumes from.
const resumeWait = 2 * time.Second

// awaitResumePoint waits, at most resumeWait, until this process has
// applied revision from: a client failing over from another daemon of the
// controller names the revision that daemon had applied, which this one
// may not have yet. Were the snapshot older than from, the changes
// between the two would reach the watcher from the feed although the
// client had them already. A revision this daemon does not reach in time
// (one that is no commit of the feed, or a client's invention) is let be:
// the watcher then repeats what came after its snapshot, never misses it.
func (st *State) awaitResumePoint(ctx context.Context, from uint64) {
	wctx, cancel := context.WithTimeout(ctx, resumeWait)
	defer cancel()
	_ = st.store.WaitApplied(wctx, from)
}

// replay returns the ids of the changes after revision from, up to upto,
// that the history holds of entities fs may select (see viewResumable).
// ErrResumeTooOld when the history after from is not all kept.
func (st *State) replay(ctx context.Context, from, upto uint64, fs []watcher.Filter, id func(c watcher.Change) (string, bool)) ([]string, error) {
	if from >= upto {
		// Nothing after from yet, here: from may be a revision another
		// daemon has applied and this one not yet, whose changes this
		// watcher then gets from the feed.
		return []string{}, nil
	}
	h, ok := st.store.(store.Historian)
	if !ok {
		return nil, ErrResumeTooOld
	}
	st.resumes.replays.Add(1)
	ids := []string{}
	var seen watcher.IDSet
	shared, err := st.history.replay(ctx, st.resumes, h, from, upto, max(upto, st.store.Revision()), func(cm store.Commit) {
		for _, wr := range cm.Writes {
			for _, f := range fs {
				c, ok := historyChange(wr, f)
				if !ok {
					continue
				}
				if s, ok := id(c); ok && seen.Add(s) {
					ids = append(ids, s)
				}
				break
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if shared {
		st.resumes.shared.Add(1)
	}
	return ids, nil
}

// ResumeStats counts what resumed watches cost this State's store
// (the daemon's /metrics: provisiond_history_resumes_total and after).
type ResumeStats struct {
	// Replays is the resumed watchers that replayed the history after
	// their revision (one per watcher: a bulk Watch call makes several).
	Replays uint64
	// Shared is the replays served from the history window (no store
	// read: history_window.go).
	Shared uint64
	// Reads is the reads of the store's history they made (a History
	// call, each paged on etcd, or a HistoryStats call), Records the
	// records those returned and Bytes the records' size.
	Reads, Records, Bytes uint64
	// Recent is the reads of the newest commits for the window served
	// from what the store holds in memory of the revisions this process
	// applied last (store.RecentHistorian), not from a read of the store.
	Recent uint64
}

// resumeCounters are a State's ResumeStats, shared by its copies.
type resumeCounters struct {
	replays, shared, reads, records, bytes, recent atomic.Uint64
}

// ResumeStats returns what resumed watches cost the store so far.
func (st *State) ResumeStats() ResumeStats {
	c := st.resumes
	return ResumeStats{Replays: c.replays.Load(), Shared: c.shared.Load(), Reads: c.reads.Load(), Records: c.records.Load(), Bytes: c.bytes.Load(), Recent: c.recent.Load()}
}

// readHistory calls fn with each commit the history holds after revision
// from, up to upto, counting the reads, and returns the oldest revision
// kept, read after them. ErrResumeTooOld when the history after from is
// not all kept.
func (c *resumeCounters) readHistory(ctx context.Context, h store.Historian, from, upto uint64, fn func(store.Commit)) (oldest uint64, err error) {
	after := from
	for after < upto {
		c.reads.Add(1)
		last, more, err := h.History(ctx, after, 0, func(cm store.Commit) error {
			if cm.Rev > upto {
				return errStopHistory
			}
			c.records.Add(1)
			c.bytes.Add(uint64(commitSize(cm)))
			fn(cm)
			return nil
		})
		if errors.Is(err, store.ErrHistoryGone) {
			return 0, ErrResumeTooOld
		}
		if err != nil && err != errStopHistory {
			return 0, err
		}
		if err == errStopHistory || !more || last <= after {
			break
		}
		after = last
	}
	// Checked after reading: a record pruned while it was read is then
	// seen as missing, never skipped unnoticed.
	c.reads.Add(1)
	stats, err := h.HistoryStats(ctx)
	if err != nil {
		return 0, err
	}
	if stats.Oldest == 0 || stats.Oldest > from+1 {
		return 0, ErrResumeTooOld
	}
	return stats.Oldest, nil
}

// commitSize is about the bytes of cm's record: its origin, keys and
// values.
func commitSize(cm store.Commit) int {
	n := 8 + len(cm.Origin.Who) + len(cm.Origin.Addr) + len(cm.Origin.Daemon) + len(cm.Origin.Call)
	for _, w := range cm.Writes {
		n += 2 + len(w.Key) + len(w.Before) + len(w.After)
		for _, m := range w.Members {
			n += 3 + len(m.Name) + len(m.Before) + len(m.After)
		}
	}
	return n
}

// historyChange is the watcher change a write of the history may have
// recorded, as f would see it: f's kind and model, the entity's id (and
// parent, for a machine) and the fields of f the write may have changed.
// It reports false for a write f cannot select.
func historyChange(w store.Write, f watcher.Filter) (watcher.Change, bool) {
	kind, rest := store.Kind(w.Key), store.Rest(w.Key)
	if kind != string(f.Kind) {
		return watcher.Change{}, false
	}
	model, id := rest, rest
	if kind != string(KindModel) {
		var ok bool
		if model, id, ok = strings.Cut(rest, "/"); !ok {
			return watcher.Change{}, false
		}
	}
	if !f.AllModels && model != f.Model {
		return watcher.Change{}, false
	}
	c := change(f.Kind, model, id)
	var may []string
	switch w.Op {
	case store.Created:
		may = []string{watcher.FieldCreated}
	case store.Removed:
		may = []string{watcher.FieldRemoved}
	case store.Patched:
		for _, m := range w.Members {
			if m.Name == "life" {
				may = append(may, watcher.FieldLife)
				if string(m.After) == `"`+string(Dead)+`"` {
					may = append(may, FieldDead)
				}
			} else {
				may = append(may, memberFields(m.Name, f.Fields)...)
			}
		}
	default: // replaced whole, or elided: any field
		may = append(slices.Clone(f.Fields), watcher.FieldLife)
	}
	if len(f.Fields) == 0 {
		c.Fields = may
	} else {
		for _, fl := range may {
			if slices.Contains(f.Fields, fl) || fl == FieldDead {
				c.Fields = append(c.Fields, fl)
			}
		}
	}
	if f.ID != "" && f.ID != c.ID || f.Parent != "" && f.Parent != c.Parent || len(c.Fields) == 0 && len(f.Fields) > 0 {
		return watcher.Change{}, false
	}
	return c, true
}

// fieldMembers are the fields known to be recorded exactly when one of
// these members of the record changes (and for no other member): a
// write of another member does not change them.
var fieldMembers = map[string][]string{
	FieldScale:       {"scale"},
	FieldConfig:      {"config"},
	FieldRemovalMark: {"marked-for-removal"},
}

// memberFields are the fields of fs a write of member (other than "life")
// may have changed: those fieldMembers says it carries, and every field
// it says nothing of, but created, removed and life.
func memberFields(member string, fs []string) []string {
	var out []string
	for _, f := range fs {
		if f == watcher.FieldCreated || f == watcher.FieldRemoved || f == watcher.FieldLife {
			continue
		}
		if ms, known := fieldMembers[f]; known && !slices.Contains(ms, member) {
			continue
		}
		out = append(out, f)
	}
	return out
}
