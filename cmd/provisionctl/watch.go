package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs that observe: watch.
func (a *app) addWatchCommands(root *cobra.Command) {
	root.AddCommand(a.watchCommand())
}

// watchEvent is one line of watch output.
type watchEvent struct {
	Time  string `json:"time"`
	Model string `json:"model"`
	Kind  string `json:"kind"`
	ID    string `json:"id"`
}

const stopTimeout = 5 * time.Second

func (a *app) watchCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "watch",
		GroupID: "observe",
		Short:   "Print a model's changes as they commit",
		Long: `Print one line for each entity of the model that changes, as the changes
commit, until interrupted (Ctrl-C, SIGTERM) or until the model is removed.
A line names the kind of the entity and its id: "model" (the model itself:
life, config), "machine" (id 0, 0/lxd/1...), and the other kinds as they
are added. Several changes to one entity that commit while a line is being
written are reported once. Changes committed before the watch started are
not shown.

The table format prints "TIME  KIND  ID"; --format json prints one JSON
object per line: {"time", "model", "kind", "id"}; yaml one document per
change. The start is announced on stderr.`,
		Example: `  provisionctl watch
  provisionctl watch -m k8s --format json | jq -c 'select(.kind == "machine")'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.watch(cmd.Context(), model, format)
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) watch(ctx context.Context, model string, format formatFlag) error {
	var info params.ModelConfigInfo
	if err := a.call(ctx, "ModelConfig", params.ModelArgs{Model: model}, &info); err != nil {
		return err
	}
	var res params.StringsWatchResult
	if err := a.call(ctx, "WatchModel", params.ModelArgs{Model: model}, &res); err != nil {
		return err
	}
	w := client.NewStringsWatcher(a.conn, res.StringsWatcherId)
	a.infof("Watching model %q; interrupt to stop.", info.Model)
	self := "model/" + info.UUID
	for {
		ids, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
				defer cancel()
				_ = w.Stop(sctx)
				return nil
			}
			return err
		}
		now := time.Now().Format(time.RFC3339)
		for _, id := range ids {
			kind, eid, _ := strings.Cut(id, "/")
			if err := writeEvent(a.stdout, format, watchEvent{Time: now, Model: info.Model, Kind: kind, ID: eid}); err != nil {
				return err
			}
		}
		if slices.Contains(ids, self) {
			var cur params.ModelConfigInfo
			err := a.call(ctx, "ModelConfig", params.ModelArgs{Model: info.Model}, &cur)
			if client.IsCode(err, params.CodeNotFound) || (err == nil && cur.UUID != info.UUID) {
				a.infof("Model %q was removed.", info.Model)
				return nil
			}
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("checking the model: %w", err)
			}
		}
	}
}

func writeEvent(w io.Writer, format formatFlag, ev watchEvent) error {
	switch format {
	case formatJSON:
		return writeJSON(w, ev)
	case formatYAML:
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		return writeYAML(w, ev)
	}
	_, err := fmt.Fprintf(w, "%s  %-11s %s\n", ev.Time, ev.Kind, ev.ID)
	return err
}
