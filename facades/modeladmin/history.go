package modeladmin

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func registerHistory(m *methods) {
	rpc.Handle(m, "History", (*ModelAdmin).History)
}

// MaxHistoryBound bounds the length of each string of HistoryArgs.
const MaxHistoryBound = 256

// History returns a page of the history of commits: the changes of
// entities args selects, in revision order, each with its commit's time
// and origin (provisionctl history). A page reads at most
// state.HistoryPage commits and returns at most args.Limit changes (a
// commit is never split); More says to call again after Next.
func (a *ModelAdmin) History(ctx context.Context, args params.HistoryArgs) (params.HistoryResult, error) {
	for _, s := range []string{args.Model, args.Kind, args.Entity, args.Who, args.Since, args.Until} {
		if len(s) > MaxHistoryBound {
			return params.HistoryResult{}, errors.NewNotValid(nil, fmt.Sprintf("a history filter of %d bytes: at most %d", len(s), MaxHistoryBound))
		}
	}
	if args.Limit < 0 || args.Limit > state.HistoryPage {
		return params.HistoryResult{}, errors.NewNotValid(nil, fmt.Sprintf("limit %d not valid: want 0 to %d", args.Limit, state.HistoryPage))
	}
	f := state.HistoryFilter{Kind: args.Kind, Who: args.Who, After: args.After}
	if args.Model != "" {
		m, err := a.model(ctx, args.Model)
		if err != nil {
			return params.HistoryResult{}, err
		}
		f.Model = m.UUID
	}
	if args.Entity != "" {
		kind, id := entityOf(args.Entity)
		if f.Kind != "" && kind != "" && kind != f.Kind {
			return params.HistoryResult{}, errors.NewNotValid(nil, fmt.Sprintf("entity %q is a %s, not a %s", args.Entity, kind, f.Kind))
		}
		if kind != "" {
			f.Kind = kind
		}
		f.Entity = id
	}
	if args.Since != "" {
		rev, t, err := parseHistoryBound("since", args.Since)
		if err != nil {
			return params.HistoryResult{}, err
		}
		if rev > 0 {
			f.After = max(f.After, rev-1)
		}
		f.SinceTime = t
	}
	if args.Until != "" {
		rev, t, err := parseHistoryBound("until", args.Until)
		if err != nil {
			return params.HistoryResult{}, err
		}
		f.Until, f.UntilTime = rev, t
	}
	changes, next, more, err := a.st.History(ctx, f, args.Limit)
	if err != nil {
		return params.HistoryResult{}, err
	}
	out := params.HistoryResult{Changes: make([]params.HistoryChange, 0, len(changes)), Next: next, More: more}
	if args.After > 0 {
		// A read going on after a revision (provisionctl history --from,
		// --follow) is told, read after its page, the oldest revision kept
		// now: the daemon's figures may predate the last pruning.
		if st, err := a.st.OldestHistory(ctx); err == nil {
			out.OldestRevision, out.OldestTime = st.Oldest, oldestTime(st)
		}
	} else if h := a.ctx.Deps.History; h != nil {
		if st, _, err := h(ctx); err == nil {
			out.OldestRevision, out.OldestTime = st.Oldest, oldestTime(st)
		}
	}
	for _, c := range changes {
		out.Changes = append(out.Changes, params.HistoryChange{
			Revision: c.Rev, Time: c.Time.UTC().Format(time.RFC3339Nano),
			Who: c.Origin.Who, Address: c.Origin.Addr, Daemon: c.Origin.Daemon, Call: c.Origin.Call,
			Model: c.Model, Kind: c.Kind, ID: c.ID, Op: c.Op, Field: c.Field, Before: c.Before, After: c.After,
		})
	}
	return out, nil
}

// entityOf reads a history entity filter: a tag of an entity kind state
// keeps (machine-0, unit-mysql-0, application-mysql, model-UUID,
// user-admin) as its kind and id, anything else as an id of any kind.
func entityOf(s string) (kind, id string) {
	t, err := facade.ParseTag(s)
	if err != nil {
		return "", s
	}
	switch t.Kind() {
	case names.MachineTagKind, names.UnitTagKind, names.ApplicationTagKind, names.ModelTagKind, names.UserTagKind:
		return t.Kind(), t.Id()
	}
	return "", s
}

// parseHistoryBound reads --since or --until: a revision (at least 1) or
// an RFC 3339 time.
func parseHistoryBound(what, s string) (rev uint64, t time.Time, err error) {
	if strings.Trim(s, "0123456789") == "" {
		rev, err := strconv.ParseUint(s, 10, 64)
		if err != nil || rev == 0 {
			return 0, time.Time{}, errors.NewNotValid(nil, fmt.Sprintf("%s %q not valid: a revision is a number from 1", what, s))
		}
		return rev, time.Time{}, nil
	}
	t, err = time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, time.Time{}, errors.NewNotValid(nil, fmt.Sprintf("%s %q not valid: want a revision (12345) or an RFC 3339 time (2026-01-02T15:04:05Z)", what, s))
	}
	return 0, t, nil
}

// oldestTime is the time of the oldest record kept as History says it
// ("" when none is kept).
func oldestTime(st state.HistoryStats) string {
	if st.Oldest == 0 || st.OldestTime.IsZero() {
		return ""
	}
	return st.OldestTime.UTC().Format(time.RFC3339Nano)
}
