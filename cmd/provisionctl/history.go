package main

import (
	"fmt"

	"github.com/spf13/cobra"

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
	)
	cmd := &cobra.Command{
		Use:     "history [--model M] [--entity E] [--kind K] [--who TAG] [--since REV|TIME] [--until REV|TIME]",
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

json: one object per line per change: {revision, time, who, address,
daemon, call, model, kind, id, op (created, removed, changed), field,
before, after}. yaml: the changes as a list.`,
		Example: `  provisionctl history --model default --entity machine-0
  provisionctl history --who user-admin --since 2026-01-02T00:00:00Z
  provisionctl history --since 1200 --until 1300 --format json | jq -r .call`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return fmt.Errorf("--limit %d: want 0 (no limit) or more", limit)
			}
			ctx := cmd.Context()
			var all []params.HistoryChange // yaml's list
			printed := 0
			for {
				if limit > 0 {
					args.Limit = min(limit-printed, 1000)
				}
				var res params.HistoryResult
				if err := a.call(ctx, "History", args, &res); err != nil {
					return err
				}
				for _, c := range res.Changes {
					if limit > 0 && printed == limit {
						break
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
					if err != nil {
						return err
					}
				}
				if !res.More || limit > 0 && printed >= limit {
					break
				}
				args.After = res.Next
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
	addFormatFlag(cmd, &format)
	return cmd
}

// historyChangeLine is history's line of one change, its values cut at
// historyMaxValue.
func historyChangeLine(c params.HistoryChange, model string) string {
	return c.Line(model, func(v string) string { return cut(v, historyMaxValue) })
}
