package robustness

import (
	"context"
	"errors"
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
// reset. A watcher of kind checker.KindModelResumed instead watches
// again resumed from the revision its last value covered (the header
// from-revision, docs/history.md): its subscriptions are one stream, so
// the checker finds any change the resumption lost or delivered twice;
// the stream ends only in a reset (the history after the revision no
// longer kept), and a new one starts afresh.
type watcherRun struct {
	h     *harness
	d     *daemon
	name  string
	kind  string // checker.Kind*
	scope string // the host machine, the application

	// KindModelResumed: the revision the values so far cover, and the
	// stream the subscriptions continue (-1: none yet).
	rev   uint64
	chain int
	// lastErr is the last subscription's failure, logged when it changes.
	lastErr string

	mu      sync.Mutex
	streams []checker.Stream
}

// newWatchers makes the watchers of every kind on daemon d.
func (w *workload) newWatchers(d *daemon) []*watcherRun {
	var out []*watcherRun
	for _, k := range checker.WatchKinds {
		if k == checker.KindModelResumed && !w.h.cfg.Resumed {
			continue
		}
		wr := &watcherRun{h: w.h, d: d, name: k + "-" + d.name, kind: k, chain: -1}
		switch k {
		case checker.KindContainers:
			wr.scope = w.host
		case checker.KindScale, checker.KindPodSpec:
			wr.scope = caasApp
		case checker.KindCAASModel:
			wr.scope = caasModel
		}
		out = append(out, wr)
	}
	return out
}

// run watches until ctx ends. The caller's goroutine owns it.
func (wr *watcherRun) run(ctx context.Context, w *workload) {
	for ctx.Err() == nil {
		if err := wr.stream(ctx, w); err != nil {
			if msg := err.Error(); wr.kind == checker.KindModelResumed && msg != wr.lastErr && ctx.Err() == nil {
				wr.h.logf("robustness: %s: cannot watch (from revision %d): %v", wr.name, wr.rev, err)
				wr.lastErr = msg
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if wr.chain >= 0 { // stopped between two subscriptions
		wr.end(wr.chain, wr.h.now(), checker.EndStopped, ctx.Err())
	}
}

// watch makes the subscription of wr's kind on c and returns its Next:
// what each delivery names, as the entities of the writes it is of
// (checker.Matches). A resumed watch (KindModelResumed) also returns its
// first value, what changed after wr.rev, and its Next moves wr.rev on.
func (wr *watcherRun) watch(ctx context.Context, c *client.Conn, w *workload) (next func(context.Context) ([]string, error), initial []string, err error) {
	// entities names what a strings watcher's ids are of.
	entities := func(ids []string) []string {
		switch wr.kind {
		case checker.KindModel, checker.KindModelResumed, checker.KindCAASModel:
			return ids // "KIND/ID" already
		case checker.KindModels:
			ents := make([]string, len(ids))
			for i, id := range ids {
				ents[i] = "model/" + id
			}
			return ents
		}
		ents := make([]string, len(ids))
		for i, id := range ids {
			ents[i] = machineEntity(id)
		}
		return ents
	}
	strs := func(id string, err error) (func(context.Context) ([]string, error), []string, error) {
		if err != nil {
			return nil, nil, err
		}
		sw := client.NewStringsWatcher(c, id)
		return func(ctx context.Context) ([]string, error) {
			ids, err := sw.Next(ctx)
			return entities(ids), err
		}, nil, nil
	}
	notify := func(entity string) func(res params.NotifyWatchResult, err error) (func(context.Context) ([]string, error), []string, error) {
		return func(res params.NotifyWatchResult, err error) (func(context.Context) ([]string, error), []string, error) {
			if err == nil && res.Error != nil {
				err = res.Error
			}
			if err != nil {
				return nil, nil, err
			}
			nw := client.NewNotifyWatcher(c, res.NotifyWatcherId)
			return func(ctx context.Context) ([]string, error) {
				if err := nw.Next(ctx); err != nil {
					return nil, err
				}
				return []string{entity}, nil
			}, nil, nil
		}
	}
	ids := func(res params.StringsWatchResult, err error) (string, error) {
		if err == nil && res.Error != nil {
			err = res.Error
		}
		return res.StringsWatcherId, err
	}
	entity := checker.NotifyEntity(wr.kind, wr.scope)
	switch wr.kind {
	case checker.KindModel:
		var res params.StringsWatchResult
		err := c.Call(ctx, client.ModelAdminFacade, client.ModelAdminVersion, "", "WatchModel", params.ModelArgs{Model: "default"}, &res)
		return strs(ids(res, err))
	case checker.KindModelResumed:
		var res params.StringsWatchResult
		rev, err := c.CallFrom(ctx, client.ModelAdminFacade, client.ModelAdminVersion, "", "WatchModel", wr.rev, params.ModelArgs{Model: "default"}, &res)
		id, err := ids(res, err)
		if err == nil && rev == 0 {
			err = errors.New("a watch resumed from a revision answered none")
		}
		if err != nil {
			return nil, nil, err
		}
		wr.rev = rev
		sw := client.NewStringsWatcher(c, id)
		return func(ctx context.Context) ([]string, error) {
			ids, rev, err := sw.NextRevision(ctx)
			if err == nil {
				wr.rev = rev
			}
			return ids, err
		}, res.Changes, nil
	case checker.KindCAASModel:
		var res params.StringsWatchResult
		err := c.Call(ctx, client.ModelAdminFacade, client.ModelAdminVersion, "", "WatchModel", params.ModelArgs{Model: caasModel}, &res)
		return strs(ids(res, err))
	case checker.KindModels:
		var res params.StringsWatchResult
		err := c.Call(ctx, client.ModelAdminFacade, client.ModelAdminVersion, "", "WatchModels", nil, &res)
		return strs(ids(res, err))
	case checker.KindStartTimes:
		var res params.StringsWatchResult
		err := c.Call(ctx, client.ProvisionerFacade, client.ProvisionerVersion, "", "WatchModelMachineStartTimes", nil, &res)
		return strs(ids(res, err))
	case checker.KindErrorRetry, checker.KindAPIHostPorts:
		method := map[string]string{checker.KindErrorRetry: "WatchMachineErrorRetry", checker.KindAPIHostPorts: "WatchAPIHostPorts"}[wr.kind]
		var res params.NotifyWatchResult
		err := c.Call(ctx, client.ProvisionerFacade, client.ProvisionerVersion, "", method, nil, &res)
		return notify(entity)(res, err)
	case checker.KindRemovals:
		res, err := client.NewMachineUndertaker(c).WatchMachineRemovals(ctx, client.Entities("model-"+wr.h.creds.DefaultModelUUID))
		return notify(entity)(only(res.Results, err))
	case checker.KindPodSpec:
		res, err := client.NewCAASUnitProvisioner(c).WatchPodSpec(ctx, client.Entities(client.ApplicationTag(wr.scope)))
		return notify(entity)(only(res.Results, err))
	case checker.KindMachines:
		var res params.StringsWatchResult
		err := c.Call(ctx, client.ProvisionerFacade, client.ProvisionerVersion, "", "WatchModelMachines", nil, &res)
		return strs(ids(res, err))
	case checker.KindContainers:
		res, err := client.NewProvisioner(c).WatchContainers(ctx, params.WatchContainers{Params: []params.WatchContainer{
			{MachineTag: machineTag(wr.scope), ContainerType: "lxd"}}})
		return strs(ids(only(res.Results, err)))
	case checker.KindConfig:
		var res params.NotifyWatchResult
		err := c.Call(ctx, client.ProvisionerFacade, client.ProvisionerVersion, "", "WatchForModelConfigChanges", nil, &res)
		return notify("model/"+wr.h.creds.DefaultModelUUID)(res, err)
	case checker.KindScale:
		res, err := client.NewCAASUnitProvisioner(c).WatchApplicationsScale(ctx, client.Entities(client.ApplicationTag(wr.scope)))
		return notify(entity)(only(res.Results, err))
	}
	return nil, nil, fmt.Errorf("unknown watcher kind %q", wr.kind)
}

// login is how wr's kind watches: on which model, as the controller
// agent or the admin.
func (wr *watcherRun) login(w *workload) (model string, agent bool) {
	switch wr.kind {
	case checker.KindScale, checker.KindPodSpec:
		return w.caasUUID, true
	case checker.KindModel, checker.KindModelResumed, checker.KindCAASModel, checker.KindModels:
		return wr.h.creds.DefaultModelUUID, false
	}
	return wr.h.creds.DefaultModelUUID, true
}

// stream makes one subscription and follows it until it ends; an error
// is a subscription that could not be made.
func (wr *watcherRun) stream(ctx context.Context, w *workload) error {
	model, agent := wr.login(w)
	c, err := wr.h.dialModel(ctx, wr.d, agent, model)
	if err != nil {
		return err
	}
	defer c.Close()
	st := checker.Stream{Watcher: wr.name, Kind: wr.kind, Scope: wr.scope, Daemon: wr.d.name, Start: wr.h.now()}
	resumed := wr.kind == checker.KindModelResumed
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	next, initial, err := wr.watch(cctx, c, w)
	cancel()
	if resumed && client.IsCode(err, params.CodeWatcherReset) && wr.chain >= 0 {
		// The history after wr.rev is no longer kept: the stream ends
		// in a reset, and the next starts afresh.
		wr.end(wr.chain, wr.h.now(), checker.EndReset, err)
		wr.chain, wr.rev = -1, 0
		return err
	}
	if err != nil {
		return err
	}
	st.Started = wr.h.now()
	if wr.lastErr != "" {
		wr.h.logf("robustness: %s: watching again (from revision %d)", wr.name, wr.rev)
		wr.lastErr = ""
	}
	var idx int
	switch {
	case !resumed:
		idx = wr.add(st)
	case wr.chain < 0:
		idx = wr.add(st)
		wr.chain = idx
	default:
		// The same stream goes on: its first value is what changed
		// while it was away.
		idx = wr.chain
		wr.mu.Lock()
		s := &wr.streams[idx]
		s.Deliveries = append(s.Deliveries, checker.Delivery{Next: st.Start, Recv: st.Started, Entities: initial})
		s.Resumes++
		wr.mu.Unlock()
	}
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
			case resumed:
				return nil // resumed from wr.rev on the next subscription
			}
			if resumed {
				wr.chain, wr.rev = -1, 0
			}
			wr.end(idx, recv, reason, err)
			return nil
		}
		wr.mu.Lock()
		s := &wr.streams[idx]
		s.Deliveries = append(s.Deliveries, checker.Delivery{Next: called, Recv: recv, Entities: changes})
		wr.mu.Unlock()
	}
}

// end ends stream idx at time at.
func (wr *watcherRun) end(idx int, at int64, reason string, err error) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	s := &wr.streams[idx]
	s.End, s.EndReason, s.EndErr = at, reason, err.Error()
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

// waitStreaming waits until wr has a subscription made and not ended
// (after a daemon's restart its watchers subscribe again), until ctx
// ends: a write made after it is then one its stream must deliver, not
// one its new subscription's first value may hold.
func (wr *watcherRun) waitStreaming(ctx context.Context) error {
	for {
		wr.mu.Lock()
		n := len(wr.streams)
		ok := n > 0 && wr.streams[n-1].Started > 0 && wr.streams[n-1].End == 0
		wr.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: no subscription after the faults were healed: %w", wr.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// only is the one result of a bulk call of one item.
func only[R any](rs []R, err error) (R, error) {
	var r R
	if err == nil && len(rs) != 1 {
		err = fmt.Errorf("%d results, want 1", len(rs))
	}
	if err != nil {
		return r, err
	}
	return rs[0], nil
}
