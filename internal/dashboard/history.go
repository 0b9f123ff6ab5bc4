package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

// The history panels: a model's recent changes with who made them (the
// page's History panel, fed by the stream's "history" events), and one
// entity's (GET /dashboard/history, a machine's or unit's row's History
// button). Both read the history as provisionctl history does
// (Config.History is ModelAdmin.History's read) and show each change with
// its words (params.HistoryChange's WhoText, EntityText, WhatText).

// Bounds of the history panels.
const (
	// historyShown is how many changes a panel shows, newest first.
	historyShown = 50
	// historyWindow is how many revisions one read looks back at, and
	// historyScan how far back a panel looks for its changes at most: a
	// model or entity that changed nothing in the last historyScan
	// revisions shows none (provisionctl history goes further).
	historyWindow = 1000
	historyScan   = 10 * historyWindow
)

// historyEntry is one change as a panel shows it: the text of each part
// is the daemon's (as provisionctl history prints it), never the page's.
type historyEntry struct {
	Rev  uint64 `json:"rev"`
	Time string `json:"time"` // RFC 3339, UTC
	Who  string `json:"who"`  // tag@address/daemon
	Call string `json:"call"` // Facade.Method
	// Kind and ID name the entity (to match a row); Entity is how the
	// line names it.
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Entity string `json:"entity"`
	What   string `json:"what"` // created V, removed V, field: before -> after
}

func historyEntryOf(c params.HistoryChange) historyEntry {
	return historyEntry{Rev: c.Revision, Time: c.Time, Who: c.WhoText(), Call: c.CallText(), Kind: c.Kind, ID: c.ID,
		Entity: c.EntityText(c.Model), What: c.WhatText(nil)}
}

// historyOldest is the oldest point the history keeps, which a panel
// names when its changes reach back to it: what is older was pruned.
type historyOldest struct {
	Rev  uint64 `json:"rev"`
	Time string `json:"time"` // RFC 3339, UTC
}

// recentHistory returns the last n changes args selects (its model set),
// newest first, looking back historyScan revisions at most, and the
// revision it read up to; and, when fewer than n were found because the
// read reached the oldest revision kept, that revision and its time.
func (d *Dashboard) recentHistory(ctx context.Context, args params.HistoryArgs, n int) (out []historyEntry, upTo uint64, oldest *historyOldest, err error) {
	upTo = d.cfg.State.Revision()
	out = []historyEntry{}
	var kept historyOldest
	reached := false
	for hi := upTo; hi > 0 && upTo-hi < historyScan && len(out) < n && !reached; {
		lo := hi - min(hi, historyWindow)
		args.After, args.Until = lo, strconv.FormatUint(hi, 10)
		var window []params.HistoryChange // oldest first
		for {
			res, err := d.cfg.History(ctx, args)
			if err != nil {
				return nil, 0, nil, err
			}
			window = append(window, res.Changes...)
			if res.OldestRevision > lo {
				// This window starts at the oldest kept: nothing before it.
				reached, kept = true, historyOldest{res.OldestRevision, res.OldestTime}
			}
			if !res.More {
				break
			}
			args.After = res.Next
		}
		for i := len(window) - 1; i >= 0 && len(out) < n; i-- {
			out = append(out, historyEntryOf(window[i]))
		}
		hi = lo
	}
	if reached && len(out) < n {
		oldest = &kept
	}
	return out, upTo, oldest, nil
}

// newHistory returns model's changes after revision after, newest first,
// and the revision to go on after; reset when there were more than
// historyShown of them (or too many commits to read at once): then the
// changes are the last historyShown, to replace the panel's.
func (d *Dashboard) newHistory(ctx context.Context, model string, after uint64) (out []historyEntry, next uint64, reset bool, err error) {
	res, err := d.cfg.History(ctx, params.HistoryArgs{Model: model, After: after, Limit: historyShown})
	if err != nil {
		return nil, after, false, err
	}
	if res.More {
		out, next, _, err = d.recentHistory(ctx, params.HistoryArgs{Model: model}, historyShown)
		return out, next, true, err
	}
	out = make([]historyEntry, 0, len(res.Changes))
	for i := len(res.Changes) - 1; i >= 0; i-- {
		out = append(out, historyEntryOf(res.Changes[i]))
	}
	return out, max(after, res.Next), false, nil
}

// historyError is what a panel says when the history cannot be read.
func (d *Dashboard) historyError(err error, model string) string {
	if jujuerrors.Is(err, jujuerrors.NotSupported) {
		return "This controller's store keeps no history."
	}
	d.log.Error("dashboard: reading the history failed", "model", model, "err", err)
	return "The history could not be read (see the daemon's log)."
}

// entityHistory serves GET /dashboard/history?model=M&kind=K&id=ID: the
// last historyShown changes of one entity, newest first, as JSON
// {"kind", "id", "changes", "error", "oldest"} (oldest: the oldest
// revision kept and its time, when the changes reach back to it).
// Superusers only, as the models are.
func (d *Dashboard) entityHistory(w http.ResponseWriter, r *http.Request) {
	sess, ok := d.sessions.fromRequest(r)
	if !ok {
		http.Error(w, "no session: log in at "+Prefix+"login", http.StatusUnauthorized)
		return
	}
	if sess.user.Access != state.AccessSuperuser {
		http.Error(w, "only controller superusers see models", http.StatusForbidden)
		return
	}
	if d.cfg.History == nil {
		http.Error(w, "no history", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	kind, id := q.Get("kind"), q.Get("id")
	if kind == "" || id == "" {
		http.Error(w, "kind and id are required", http.StatusBadRequest)
		return
	}
	m, err := d.resolveModel(r.Context(), q.Get("model"))
	if err != nil {
		http.Error(w, "no such model", http.StatusNotFound)
		return
	}
	out := map[string]any{"kind": kind, "id": id}
	changes, _, oldest, err := d.recentHistory(r.Context(), params.HistoryArgs{Model: m.UUID, Kind: kind, Entity: id}, historyShown)
	if oldest != nil {
		out["oldest"] = oldest
	}
	switch {
	case jujuerrors.Is(err, jujuerrors.NotValid):
		http.Error(w, "bad entity: "+err.Error(), http.StatusBadRequest)
		return
	case err != nil:
		out["error"] = d.historyError(err, m.UUID)
		changes = []historyEntry{}
	}
	out["changes"] = changes
	b, err := json.Marshal(out)
	if err != nil {
		http.Error(w, "cannot encode the history", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
