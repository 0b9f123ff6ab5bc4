package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// historyMaxValue is how much of a value a history line shows (json and
// yaml show it whole).
const historyMaxValue = 120

func (a *app) historyCommand() *cobra.Command {
	var (
		format formatFlag
		args   params.HistoryArgs
		limit  int
		from   string
		follow bool
	)
	cmd := &cobra.Command{
		Use:     "history [--model M] [--entity E] [--kind K] [--who TAG] [--since REV|TIME] [--until REV|TIME] [--from REV] [--follow]",
		GroupID: "observe",
		Short:   "Show what changed, who changed it and when, from the controller's history",
		Long: `Show the history of commits: every change the controller's store committed
within its history retention (provisiond --history-retention, 7 days by
default; show-controller says how far back it goes), oldest first, one
line per change:

  REVISION TIME WHO@ADDRESS[/DAEMON] FACADE.METHOD ENTITY FIELD: BEFORE -> AFTER

WHO is the user or agent logged in on the call that made the change (none
for the daemon's own work), ADDRESS where it called from and DAEMON the
daemon that served it; ENTITY is KIND/ID (in another model than the one
asked: MODEL-UUID:KIND/ID). A change that created or removed an entity
shows it whole; a change of a record shows each top-level field that
changed with its value before and after, as JSON (- : not there). Secret
fields (password hashes) show as "[redacted]". Values are cut at 120
characters; --format json and yaml show them whole.

Filters: --model (name or UUID; without it every model and the
controller's own records), --entity (a tag, machine-0, unit-mysql-0,
application-mysql, or an id, 0 or mysql/0), --kind (machine, unit,
application, model, ...), --who (the tag the change was made as),
--since and --until (a revision, inclusive, or an RFC 3339 time). The
daemon answers in pages of at most 1000 commits; provisionctl asks for
page after page until the range is done, or --limit changes are printed.

--from REV prints the changes after revision REV, exactly: given the last
revision a previous run printed, it repeats nothing and misses nothing. A
REV older than the history kept fails, naming the oldest revision kept.

--follow (-f) keeps printing changes as they commit, until interrupted
(Ctrl-C, SIGTERM: exit 0). With --model it waits on a watch of the model
resumed after the last revision read; without one it asks every second.
When the daemon goes away (a restart, a failover) it says so on stderr,
dials again as watch does (0.1s doubling to 5s, every address of the
credentials) and goes on after the last revision read: nothing committed
meanwhile is lost or printed twice.

json: one object per line per change: {revision, time, who, address,
daemon, call, model, kind, id, op (created, removed, changed), field,
before, after}. yaml: the changes as a list (not with --follow).`,
		Example: `  provisionctl history --model default --entity machine-0
  provisionctl history --who user-admin --since 2026-01-02T00:00:00Z
  provisionctl history --since 1200 --until 1300 --format json | jq -r .call
  provisionctl history --follow -m default --from 1300 --format json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 (no limit) or more", limit)
			}
			var after uint64
			if from != "" {
				rev, err := strconv.ParseUint(from, 10, 64)
				if err != nil || rev == 0 {
					return usagef("--from %q: want a revision (a number from 1, as history prints)", from)
				}
				after = rev
				args.After = rev
			}
			if follow {
				switch {
				case format == formatYAML:
					return usagef("--follow prints as changes commit: use --format table or json, not yaml (one list)")
				case args.Until != "":
					return usagef("--follow and --until: a history followed has no end")
				case limit > 0:
					return usagef("--follow and --limit: a history followed has no end")
				}
			}
			ctx := cmd.Context()
			var all []params.HistoryChange // yaml's list
			printed := 0
			emit := func(c params.HistoryChange) (bool, error) {
				if limit > 0 && printed == limit {
					return false, nil
				}
				printed++
				var err error
				switch format {
				case formatJSON:
					err = writeJSON(a.stdout, c)
				case formatYAML:
					all = append(all, c)
				default:
					_, err = fmt.Fprintln(a.stdout, historyChangeLine(c, args.Model))
				}
				return limit == 0 || printed < limit, err
			}
			if follow {
				return a.followHistory(ctx, args, after, emit)
			}
			if _, err := a.historyPages(ctx, &args, after, emit, limit); err != nil {
				return err
			}
			if format == formatYAML {
				if all == nil {
					all = []params.HistoryChange{}
				}
				return writeYAML(a.stdout, all)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&args.Model, "model", "m", "", "the model (name or UUID); default: every model")
	f.StringVar(&args.Entity, "entity", "", "an entity: a tag (machine-0, unit-mysql-0) or an id (0, mysql/0)")
	f.StringVar(&args.Kind, "kind", "", "a kind of entity (machine, unit, application, model, ...)")
	f.StringVar(&args.Who, "who", "", "the tag the changes were made as (user-admin, machine-0)")
	f.StringVar(&args.Since, "since", "", "from this revision (inclusive) or RFC 3339 time")
	f.StringVar(&args.Until, "until", "", "up to this revision (inclusive) or RFC 3339 time")
	f.IntVar(&limit, "limit", 0, "print at most this many changes (0: all)")
	f.StringVar(&from, "from", "", "the changes after this revision (the last one a previous run printed)")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing changes as they commit, until interrupted")
	addFormatFlag(cmd, &format)
	return cmd
}

// historyPoll is how often history --follow without a model asks for
// new changes (with a model it waits on a watch of the model).
const historyPoll = time.Second

// historyPages asks ModelAdmin.History page after page from args.After
// until the range is done, emit says to stop or limit (0: none) changes
// are asked for, moving args.After past each page. from > 0 is the
// revision a run asked to go on after: when the history after it is no
// longer all kept, it fails naming the oldest revision kept. It reports
// whether emit asked to stop.
func (a *app) historyPages(ctx context.Context, args *params.HistoryArgs, from uint64, emit func(params.HistoryChange) (bool, error), limit int) (bool, error) {
	printed := 0
	for {
		if limit > 0 {
			args.Limit = min(limit-printed, 1000)
		}
		var res params.HistoryResult
		if err := a.call(ctx, "History", *args, &res); err != nil {
			return false, err
		}
		if args.After == 0 && res.OldestRevision > 0 && reachesOldest(args.Since, res) {
			// The range asked for starts at or before the oldest kept.
			a.infof("The history kept begins at revision %d (%s); nothing older is kept.", res.OldestRevision, res.OldestTime)
		}
		// Checked after the read, as the daemon's resumed watch does:
		// records pruned while they were read are seen as gone.
		if from > 0 && res.OldestRevision > from+1 {
			return false, fmt.Errorf("the history after revision %d is no longer kept: the oldest revision kept is %d (see show-controller); run history without --from, or --from %d", from, res.OldestRevision, res.OldestRevision-1)
		}
		from = 0
		for _, c := range res.Changes {
			printed++
			more, err := emit(c)
			if err != nil || !more {
				return true, err
			}
		}
		if res.Next > args.After {
			args.After = res.Next
		}
		if !res.More {
			return false, nil
		}
	}
}

// followHistory prints the changes args selects after revision after (0:
// all that is kept), then those that commit, until ctx ends (nil). With a
// model it waits on a watch of the model resumed after the last revision
// read, without one it asks every historyPoll. When the connection is
// lost it dials again as watch does and goes on after the last revision
// read: nothing is printed twice or left out.
func (a *app) followHistory(ctx context.Context, args params.HistoryArgs, after uint64, emit func(params.HistoryChange) (bool, error)) error {
	for {
		err := a.followOnce(ctx, &args, after, emit)
		if ctx.Err() != nil {
			return nil
		}
		lost := a.conn != nil && a.conn.Err() != nil
		if !lost && !client.IsCode(err, params.CodeStopped) && !errors.Is(err, client.ErrConnClosed) {
			return err
		}
		cause := err
		if lost {
			cause = dialCause(a.conn.Err())
		}
		a.infof("Lost the connection to provisiond (%v); reconnecting.", cause)
		if err := a.redial(ctx, func() error { return nil }); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		a.infof("Reconnected; following the history after revision %d.", args.After)
		after = args.After
	}
}

// followOnce is followHistory on one connection: it returns when ctx ends
// or a call fails.
func (a *app) followOnce(ctx context.Context, args *params.HistoryArgs, from uint64, emit func(params.HistoryChange) (bool, error)) error {
	if _, err := a.historyPages(ctx, args, from, emit, 0); err != nil {
		return err
	}
	if args.Model == "" {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(historyPoll):
			}
			if _, err := a.historyPages(ctx, args, 0, emit, 0); err != nil {
				return err
			}
		}
	}
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	w, err := client.NewModelAdmin(c).WatchModelFrom(ctx, params.ModelArgs{Model: args.Model}, args.After)
	if client.IsCode(err, params.CodeWatcherReset) {
		// The history after what was read is gone (pruned meanwhile):
		// History says so, naming the oldest revision kept.
		_, err = a.historyPages(ctx, args, args.After, emit, 0)
		if err == nil {
			err = a.explain("WatchModel", client.ErrWatcherReset)
		}
		return err
	}
	if err != nil {
		return a.explain("WatchModel", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-w.Changes():
			if !ok {
				if err := w.Err(); err != nil {
					return err
				}
				return client.ErrConnClosed
			}
		}
		// Every change the watch reports is committed: the history
		// after the last revision read holds it.
		if _, err := a.historyPages(ctx, args, 0, emit, 0); err != nil {
			return err
		}
	}
}

// historyChangeLine is history's line of one change, its values cut at
// historyMaxValue.
func historyChangeLine(c params.HistoryChange, model string) string {
	return c.Line(model, func(v string) string { return cut(v, historyMaxValue) })
}

// reachesOldest reports whether a history read from since (a revision, a
// time, or "": the start) begins at or before the oldest revision kept.
func reachesOldest(since string, res params.HistoryResult) bool {
	if since == "" {
		return true
	}
	if rev, err := strconv.ParseUint(since, 10, 64); err == nil {
		return rev <= res.OldestRevision
	}
	t, err := time.Parse(time.RFC3339Nano, since)
	oldest, oerr := time.Parse(time.RFC3339Nano, res.OldestTime)
	return err == nil && oerr == nil && !t.After(oldest)
}
