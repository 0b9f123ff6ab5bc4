package state

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/internal/jsonscan"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// The history of commits, read back (docs/history.md): every commit's
// writes, with when and on whose behalf, as the store keeps them
// (store.Historian), turned into changes of entities: entity, field,
// before -> after.

// Origin says on whose behalf a commit was made (store.Origin). The facade
// layer answers OriginKey on each call's context; every write state makes
// with that context keeps it in its commit's history.
type Origin = store.Origin

// OriginKey is the context key of a call's Origin (store.OriginKey).
type OriginKey = store.OriginKey

// HistoryStats describes the history kept (store.HistoryStats).
type HistoryStats = store.HistoryStats

// OldestHistory is the history kept as the store says now (not the
// daemon's figures, which it reuses for a while): what a read resumed
// after a revision checks, after reading, to know none of it was gone.
func (st *State) OldestHistory(ctx context.Context) (HistoryStats, error) {
	h, ok := st.store.(store.Historian)
	if !ok {
		return HistoryStats{}, ErrNoHistory
	}
	return h.HistoryStats(ctx)
}

// HistoryFilter selects the changes History returns. Zero fields select
// everything.
type HistoryFilter struct {
	Model string // a model's UUID
	Kind  string // an entity kind ("machine", "unit", ...)
	// Entity is an entity's id within its model ("0", "0/lxd/1",
	// "mysql/0", "mysql"); with Kind unset it matches any kind's.
	Entity string
	Who    string // the origin's tag ("user-admin", "machine-0")
	// After and Until bound the revisions: those after After, up to Until
	// (0: the latest). Since and Until time bound the commit times (zero:
	// no bound).
	After, Until         uint64
	SinceTime, UntilTime time.Time
}

// HistoryChange is one change of one entity in one commit.
type HistoryChange struct {
	Rev    uint64
	Time   time.Time
	Origin Origin
	Kind   string // the record's kind
	Model  string // its model's UUID ("" for a controller-wide record)
	ID     string // its id within the model (the model's own record: its UUID)
	// Op is "created", "removed", "changed", or "written" for a write
	// whose values were too large to keep (etcd); Field the top-level member
	// of the record that changed ("" when the record is shown whole:
	// created, removed, or not a JSON object); Before and After its value
	// as JSON ("" when absent). Secret members show as "[redacted]".
	Op, Field, Before, After string
}

// HistoryPage bounds one History call: commits read, and changes
// returned.
const HistoryPage = 1000

// ErrNoHistory is returned by History on a store that keeps none.
var ErrNoHistory = errors.NotSupportedf("history on this controller's store")

// History returns the changes f selects, in revision order: at most limit
// of them (<= 0 or over HistoryPage: HistoryPage), from at most
// HistoryPage commits. next is the revision to go on after (f.After of the
// next call) and more whether commits after it remain to be read.
func (st *State) History(ctx context.Context, f HistoryFilter, limit int) (changes []HistoryChange, next uint64, more bool, err error) {
	h, ok := st.store.(store.Historian)
	if !ok {
		return nil, 0, false, ErrNoHistory
	}
	if limit <= 0 || limit > HistoryPage {
		limit = HistoryPage
	}
	next = f.After
	full := false
	last, more, err := h.History(ctx, f.After, HistoryPage, func(c store.Commit) error {
		if f.Until > 0 && c.Rev > f.Until || !f.UntilTime.IsZero() && c.Time.After(f.UntilTime) {
			return errStopHistory // what follows is later still
		}
		var add []HistoryChange
		if (f.Who == "" || c.Origin.Who == f.Who) && (f.SinceTime.IsZero() || !c.Time.Before(f.SinceTime)) {
			for _, w := range c.Writes {
				add = appendHistoryChanges(add, c, w, f)
			}
		}
		if len(changes)+len(add) > limit && len(changes) > 0 && c.Rev != next {
			// This commit goes whole into the next page (the records of
			// one revision, an etcd group commit's, are never split).
			full = true
			return errStopHistory
		}
		changes = append(changes, add...)
		next = c.Rev
		return nil
	})
	switch {
	case errors.Is(err, errStopHistory):
		return changes, next, full, nil
	case err != nil:
		return nil, 0, false, historyGone(ctx, h, fmt.Sprintf("revision %d", f.After+1), err)
	}
	// The store's last revision read covers the commits it skipped.
	return changes, max(next, last), more && !(f.Until > 0 && last >= f.Until), nil
}

var errStopHistory = errors.New("history page full")

// secretMember matches the record members whose values History never
// shows (as the audit trail redacts params).
var secretMember = regexp.MustCompile(`(?i)password|secret|token|credential|private|(^|-)key$`)

// appendHistoryChanges appends the changes of entities that w made, if f
// selects them. Keys that hold no entity (indexes, sequences, state's
// schema) are left out.
func appendHistoryChanges(out []HistoryChange, c store.Commit, w store.Write, f HistoryFilter) []HistoryChange {
	kind, rest := store.Kind(w.Key), store.Rest(w.Key)
	if strings.HasPrefix(kind, "idx-") || kind == kindSequence || kind == kindSchema {
		return out
	}
	model, id := "", rest
	switch {
	case kind == string(KindModel):
		model = rest
	case slices.Contains(ModelKinds, watcher.Kind(kind)) || slices.Contains(ModelRecordKinds, watcher.Kind(kind)):
		model, id, _ = strings.Cut(rest, "/")
	}
	if f.Model != "" && model != f.Model || f.Kind != "" && kind != f.Kind || f.Entity != "" && id != f.Entity {
		return out
	}
	ch := HistoryChange{Rev: c.Rev, Time: c.Time, Origin: c.Origin, Kind: kind, Model: model, ID: id}
	show := func(name string, v []byte) string {
		if v == nil {
			return ""
		}
		if secretMember.MatchString(name) {
			return `"[redacted]"`
		}
		return string(v)
	}
	switch w.Op {
	case store.Created:
		ch.Op, ch.After = "created", redactWhole(w.After)
		return append(out, ch)
	case store.Removed:
		ch.Op, ch.Before = "removed", redactWhole(w.Before)
		return append(out, ch)
	case store.Replaced:
		ch.Op, ch.Before, ch.After = "changed", redactWhole(w.Before), redactWhole(w.After)
		return append(out, ch)
	case store.Elided:
		ch.Op = "written" // what it did was too large to keep
		return append(out, ch)
	}
	ch.Op = "changed"
	for _, m := range w.Members {
		c := ch
		c.Field, c.Before, c.After = m.Name, show(m.Name, m.Before), show(m.Name, m.After)
		out = append(out, c)
	}
	return out
}

// redactWhole returns a whole record as History shows it: its secret
// top-level members' values replaced ("[redacted]" for a value that holds
// a secret's name but is not a plain JSON object).
func redactWhole(v []byte) string {
	if !secretMember.Match(v) {
		return string(v)
	}
	if !json.Valid(v) {
		return `"[redacted]"`
	}
	var set []patchMember
	if !jsonscan.Members(v, func(name []byte, _, _ int) bool {
		if secretMember.Match(name) {
			set = append(set, patchMember{key: string(name), val: []byte(`"[redacted]"`)})
		}
		return true
	}) {
		return `"[redacted]"`
	}
	out, ok := patchRecord(v, set)
	if !ok {
		return `"[redacted]"`
	}
	return string(out)
}
