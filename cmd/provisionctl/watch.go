package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
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
	// Removed is true when the entity is gone; Value is then null.
	// Otherwise Value holds its stored fields after the change.
	Removed bool           `json:"removed"`
	Value   map[string]any `json:"value"`
}

const stopTimeout = 5 * time.Second

// Reconnection backoff of watch: from watchBackoffMin, doubling up to
// watchBackoffMax.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// kindWidth aligns the KIND column: the longest kind a model's feed
// carries ("applicationconfig").
const kindWidth = len("applicationconfig")

func (a *app) watchCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "watch",
		GroupID: "observe",
		Short:   "Print a model's changes as they commit, with what changed",
		Long: `Print one line for each entity of the model that changes, as the changes
commit, until interrupted (Ctrl-C, SIGTERM) or until the model is removed:
the time, the kind of the entity ("model": the model itself, its life and
config; "machine" with ids 0, 0/lxd/1...; "application", "unit",
"ipaddress", "volume", "filesystem", "space", "subnet", ...), its id, and
its stored fields after the change (as etcdctl watch prints values), or
"removed". Several changes to one entity that commit while a line is being
written are reported once, with the fields as they are then. Changes
committed before the watch started are not shown.

When the daemon goes away (a restart), watch says so on stderr and dials
again with backoff (0.1s doubling to 5s) until it is back; changes
committed meanwhile are not shown.

The table format aligns TIME, KIND and ID and prints the fields as
KEY=VALUE; --format json prints one JSON object per line: {"time",
"model", "kind", "id", "removed", "value"}; yaml one document per change.
The start is announced on stderr.`,
		Example: `  provisionctl watch
  provisionctl watch -m k8s --format json | jq -c 'select(.kind == "machine") | {id, life: .value.life}'`,
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
	w, err := a.watchModel(ctx, info.UUID)
	if err != nil {
		return err
	}
	a.infof("Watching model %q; interrupt to stop.", info.Model)
	out := &eventWriter{w: a.stdout, format: format, idWidth: 8, last: map[string]string{}}
	self := "model/" + info.UUID
	for {
		ids, err := w.Next(ctx)
		if ctx.Err() != nil {
			sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			_ = w.Stop(sctx)
			return nil
		}
		if err != nil {
			// The connection is gone, or the daemon stopped our watcher
			// as it shut down: it stopped or is restarting.
			lost := a.conn != nil && a.conn.Err() != nil
			if !lost && !client.IsCode(err, params.CodeStopped) {
				return a.explain("WatchModel", err)
			}
			cause := err
			if lost {
				cause = dialCause(a.conn.Err())
			}
			a.infof("Lost the connection to provisiond (%v); reconnecting.", cause)
			if w, err = a.rewatch(ctx, info); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if w == nil {
				a.infof("Model %q was removed.", info.Model)
				return nil
			}
			a.infof("Reconnected; watching model %q again (changes while disconnected are not shown).", info.Model)
			continue
		}
		if err := a.printChanges(ctx, out, info, ids); err != nil {
			return err
		}
		if slices.Contains(ids, self) {
			var cur params.ModelConfigInfo
			err := a.call(ctx, "ModelConfig", params.ModelArgs{Model: info.UUID}, &cur)
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

func (a *app) watchModel(ctx context.Context, uuid string) (*client.StringsWatcher, error) {
	var res params.StringsWatchResult
	if err := a.call(ctx, "WatchModel", params.ModelArgs{Model: uuid}, &res); err != nil {
		return nil, err
	}
	return client.NewStringsWatcher(a.conn, res.StringsWatcherId), nil
}

// rewatch dials again with backoff until the daemon answers, then watches
// the model again; nil (and no error) when the model is gone.
func (a *app) rewatch(ctx context.Context, info params.ModelConfigInfo) (*client.StringsWatcher, error) {
	var w *client.StringsWatcher
	err := a.redial(ctx, func() error {
		var cur params.ModelConfigInfo
		err := a.call(ctx, "ModelConfig", params.ModelArgs{Model: info.UUID}, &cur)
		if client.IsCode(err, params.CodeNotFound) {
			return nil
		}
		if err == nil {
			w, err = a.watchModel(ctx, info.UUID)
		}
		return err
	})
	return w, err
}

// redial dials again with backoff (watchBackoffMin doubling to
// watchBackoffMax) until the daemon answers and then returns nil, until
// ctx ends (its error), or until the login is refused (the credentials
// changed: retrying will not help).
func (a *app) redial(ctx context.Context, then func() error) error {
	delay := watchBackoffMin
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		err := a.reconnect(ctx)
		if err == nil {
			if err = then(); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var pe *params.Error
		if errors.As(err, &pe) && pe.Code == params.CodeUnauthorized {
			return err
		}
		delay = min(2*delay, watchBackoffMax)
	}
}

// printChanges fetches the current fields of the changed entities and
// prints one event each.
func (a *app) printChanges(ctx context.Context, out *eventWriter, info params.ModelConfigInfo, ids []string) error {
	now := time.Now().UTC().Format(time.RFC3339)
	values := map[string]params.EntityValue{}
	for chunk := range slices.Chunk(ids, 500) {
		var res params.ModelEntitiesResult
		err := a.call(ctx, "ModelEntities", params.ModelEntitiesArgs{Model: info.UUID, Entities: chunk}, &res)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, v := range res.Entities {
			values[v.Kind+"/"+v.ID] = v
		}
	}
	for _, id := range ids {
		kind, eid, _ := strings.Cut(id, "/")
		v := values[id]
		// The fields are read after the changes commit, so an entity
		// changed and then removed reads "removed" for both changes: a
		// line the same as the last one printed for the entity says
		// nothing new.
		shown := "removed"
		if !v.Removed {
			shown = formatFields(v.Value)
		}
		if out.last[id] == shown {
			continue
		}
		if len(out.last) >= maxWatchRemembered {
			clear(out.last)
		}
		out.last[id] = shown
		ev := watchEvent{Time: now, Model: info.Model, Kind: kind, ID: eid, Removed: v.Removed, Value: v.Value}
		if err := out.write(ev); err != nil {
			return err
		}
	}
	return nil
}

// eventWriter prints watch events, aligning the table's columns: KIND to
// the longest kind, ID to the longest id seen so far.
type eventWriter struct {
	w       io.Writer
	format  formatFlag
	idWidth int
	last    map[string]string // kind/id -> the fields last printed, or "removed"
}

// maxWatchRemembered bounds eventWriter.last: past it, what was printed is
// forgotten (at worst one line is printed again).
const maxWatchRemembered = 100_000

func (e *eventWriter) write(ev watchEvent) error {
	switch e.format {
	case formatJSON:
		return writeJSON(e.w, ev)
	case formatYAML:
		if _, err := io.WriteString(e.w, "---\n"); err != nil {
			return err
		}
		return writeYAML(e.w, ev)
	}
	e.idWidth = max(e.idWidth, len(ev.ID))
	fields := "removed"
	if !ev.Removed {
		fields = formatFields(ev.Value)
	}
	_, err := fmt.Fprintf(e.w, "%s  %-*s  %-*s  %s\n", ev.Time, kindWidth, ev.Kind, e.idWidth, ev.ID, fields)
	return err
}

// formatFields shows an entity's fields as KEY=VALUE, sorted by key:
// strings as they are (quoted when they hold spaces or are empty), other
// values as compact JSON.
func formatFields(v map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(v)) {
		var s string
		switch x := v[k].(type) {
		case string:
			s = x
			if s == "" || strings.ContainsAny(s, " \t\n\"") {
				s = strconv.Quote(s)
			}
		default:
			b, err := compactJSON(x)
			if err != nil {
				b = []byte(fmt.Sprint(x))
			}
			s = string(b)
		}
		parts = append(parts, k+"="+s)
	}
	return strings.Join(parts, " ")
}
