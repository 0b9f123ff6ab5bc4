package robustness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/provisiond/provisiond/internal/robustness/checker"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// watcherRun holds one watcher of a kind (checker.WatchKinds) on one
// daemon for the whole run, watching again (a new stream) whenever it
// ends: the daemon killed or stopped, its connection broken, the watcher
// reset.
type watcherRun struct {
	h     *harness
	d     *daemon
	name  string
	kind  string // checker.Kind*
	scope string // the host machine, the application

	mu      sync.Mutex
	streams []checker.Stream
}

// newWatchers makes the watchers of every kind on daemon d.
func (w *workload) newWatchers(d *daemon) []*watcherRun {
	var out []*watcherRun
	for _, k := range checker.WatchKinds {
		wr := &watcherRun{h: w.h, d: d, name: k + "-" + d.name, kind: k}
		switch k {
		case checker.KindContainers:
			wr.scope = w.host
		case checker.KindScale:
			wr.scope = caasApp
		}
		out = append(out, wr)
	}
	return out
}

// run watches until ctx ends. The caller's goroutine owns it.
func (wr *watcherRun) run(ctx context.Context, w *workload) {
	for ctx.Err() == nil {
		if err := wr.stream(ctx, w); err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// watch makes the subscription of wr's kind on c and returns its Next:
// what each delivery names, as the entities of the writes it is of
// (checker.Matches).
func (wr *watcherRun) watch(ctx context.Context, c *client.Conn, w *workload) (func(context.Context) ([]string, error), error) {
	strs := func(id string, err error) (func(context.Context) ([]string, error), error) {
		if err != nil {
			return nil, err
		}
		sw := client.NewStringsWatcher(c, id)
		return func(ctx context.Context) ([]string, error) {
			ids, err := sw.Next(ctx)
			if wr.kind == checker.KindModel {
				return ids, err
			}
			ents := make([]string, len(ids))
			for i, id := range ids {
				ents[i] = machineEntity(id)
			}
			return ents, err
		}, nil
	}
	notify := func(entity string, res params.NotifyWatchResult, err error) (func(context.Context) ([]string, error), error) {
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err != nil {
			return nil, err
		}
		nw := client.NewNotifyWatcher(c, res.NotifyWatcherId)
		return func(ctx context.Context) ([]string, error) {
			if err := nw.Next(ctx); err != nil {
				return nil, err
			}
			return []string{entity}, nil
		}, nil
	}
	one := func(res params.StringsWatchResults, err error) (params.StringsWatchResult, error) {
		if err == nil && len(res.Results) != 1 {
			err = fmt.Errorf("%d results, want 1", len(res.Results))
		}
		if err != nil {
			return params.StringsWatchResult{}, err
		}
		return res.Results[0], nil
	}
	ids := func(res params.StringsWatchResult, err error) (string, error) {
		if err == nil && res.Error != nil {
			err = res.Error
		}
		return res.StringsWatcherId, err
	}
	switch wr.kind {
	case checker.KindModel:
		var res params.StringsWatchResult
		err := c.Call(ctx, client.ModelAdminFacade, client.ModelAdminVersion, "", "WatchModel", params.ModelArgs{Model: "default"}, &res)
		return strs(ids(res, err))
	case checker.KindMachines:
		var res params.StringsWatchResult
		err := c.Call(ctx, client.ProvisionerFacade, client.ProvisionerVersion, "", "WatchModelMachines", nil, &res)
		return strs(ids(res, err))
	case checker.KindContainers:
		res, err := client.NewProvisioner(c).WatchContainers(ctx, params.WatchContainers{Params: []params.WatchContainer{
			{MachineTag: machineTag(wr.scope), ContainerType: "lxd"}}})
		return strs(ids(one(res, err)))
	case checker.KindConfig:
		var res params.NotifyWatchResult
		err := c.Call(ctx, client.ProvisionerFacade, client.ProvisionerVersion, "", "WatchForModelConfigChanges", nil, &res)
		return notify("model/"+wr.h.creds.DefaultModelUUID, res, err)
	case checker.KindScale:
		res, err := client.NewCAASUnitProvisioner(c).WatchApplicationsScale(ctx, client.Entities(client.ApplicationTag(wr.scope)))
		if err == nil && len(res.Results) != 1 {
			err = fmt.Errorf("%d results, want 1", len(res.Results))
		}
		if err != nil {
			return nil, err
		}
		return notify("application/"+wr.scope, res.Results[0], nil)
	}
	return nil, fmt.Errorf("unknown watcher kind %q", wr.kind)
}

// stream makes one subscription and follows it until it ends; an error
// is a subscription that could not be made.
func (wr *watcherRun) stream(ctx context.Context, w *workload) error {
	model, agent := wr.h.creds.DefaultModelUUID, wr.kind != checker.KindModel
	if wr.kind == checker.KindScale {
		model = w.caasUUID
	}
	c, err := wr.h.dialModel(ctx, wr.d, agent, model)
	if err != nil {
		return err
	}
	defer c.Close()
	st := checker.Stream{Watcher: wr.name, Kind: wr.kind, Scope: wr.scope, Daemon: wr.d.name, Start: wr.h.now()}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	next, err := wr.watch(cctx, c, w)
	cancel()
	if err != nil {
		return err
	}
	st.Started = wr.h.now()
	idx := wr.add(st)
	for {
		called := wr.h.now()
		changes, err := next(ctx)
		recv := wr.h.now()
		if err != nil {
			reason := checker.EndBroken
			switch {
			case ctx.Err() != nil:
				reason = checker.EndStopped
			case strings.Contains(err.Error(), "watcher reset"): // the feed was compacted past: the daemon reset its watchers
				reason = checker.EndReset
			}
			wr.mu.Lock()
			s := &wr.streams[idx]
			s.End, s.EndReason, s.EndErr = recv, reason, err.Error()
			wr.mu.Unlock()
			return nil
		}
		wr.mu.Lock()
		s := &wr.streams[idx]
		s.Deliveries = append(s.Deliveries, checker.Delivery{Next: called, Recv: recv, Entities: changes})
		wr.mu.Unlock()
	}
}

func (wr *watcherRun) add(st checker.Stream) int {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	wr.streams = append(wr.streams, st)
	return len(wr.streams) - 1
}

// waitDelivered waits until a delivery naming entity arrives after
// (since the run's start), until ctx ends.
func (wr *watcherRun) waitDelivered(ctx context.Context, entity string, after int64) error {
	for {
		wr.mu.Lock()
		found := false
		for _, st := range wr.streams {
			for _, dl := range st.Deliveries {
				if dl.Recv > after && slices.Contains(dl.Entities, entity) {
					found = true
				}
			}
		}
		wr.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no delivery of %s after the last write: %w", wr.name, entity, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
