package state

import (
	"context"
	"sync"
	"time"

	"github.com/provisiond/provisiond/watcher"
)

// lifecycle turns machine changes into the events of a lifecycle watcher
// (specs/provisioner.md §3): an id is reported when the machine is
// created, when its life changes, and when it is removed, unless its
// death was already reported (a dead id is forgotten once reported).
type lifecycle struct {
	w     *watcher.Strings
	match func(id string) bool

	mu    sync.Mutex    // guards known
	known watcher.IDSet // the ids reported, not yet dead (most agents' container watchers have none)
}

// know records id as known (reported, not yet dead); l.mu is held.
func (l *lifecycle) know(id string) { l.known.Add(id) }

func (l *lifecycle) sink(_ uint64, c watcher.Change) {
	if !l.match(c.ID) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case c.Has(watcher.FieldRemoved):
		if l.known.Remove(c.ID) {
			l.w.Add(c.ID)
		}
	case c.Has(watcher.FieldCreated):
		l.know(c.ID)
		l.w.Add(c.ID)
	case c.Has(watcher.FieldLife):
		if !l.known.Has(c.ID) {
			return
		}
		if c.Has(FieldDead) {
			l.known.Remove(c.ID)
		}
		l.w.Add(c.ID)
	}
}

// idLife is one entity of a lifecycle watcher's snapshot.
type idLife struct {
	id   string
	life Life
}

// watchLifecycle subscribes a lifecycle sink to f first, then reads the
// snapshot: its ids that match (dead ones included) are the initial event,
// and the watcher is stamped with the snapshot's revision (watch_stamp.go).
func (st *State) watchLifecycle(ctx context.Context, f watcher.Filter, match func(id string) bool, snapshot func(r reader) ([]idLife, error)) (*watcher.Strings, []string, error) {
	w := watcher.NewStrings()
	l := &lifecycle{w: w, match: match}
	s := st.subscribeStamped(w, l.sink, f)
	initial, err := st.viewResumable(ctx, s, w, []watcher.Filter{f}, func(r reader) ([]string, error) {
		items, err := snapshot(r)
		if err != nil {
			return nil, err
		}
		// known is filled before the stamp passes on what came meanwhile.
		l.mu.Lock()
		defer l.mu.Unlock()
		initial := []string{}
		for _, it := range items {
			if !match(it.id) {
				continue
			}
			initial = append(initial, it.id)
			if it.life != Dead {
				l.know(it.id)
			}
		}
		return initial, nil
	}, func(c watcher.Change) (string, bool) { return c.ID, match(c.ID) })
	if err != nil {
		_ = w.Stop()
		return nil, nil, err
	}
	return w, initial, nil
}

// lifecycleFields are the fields of a lifecycle watcher's filter, shared
// by every one (the hub only reads them).
var lifecycleFields = []string{watcher.FieldCreated, watcher.FieldLife, watcher.FieldRemoved}

// watchMachineLifecycle watches the lifecycle of the machines of a model
// that match. snapshot reads the candidates (every machine of the model, or
// only a subset that holds every match: a watcher on one machine's
// containers must not decode the whole model, or a storm of agents
// reconnecting costs the square of their number).
//
// parent, when not empty, narrows the subscription to the changes of that
// machine's containers (the hub indexes them by parent), so a new container
// reaches its host's watchers only, not every lifecycle watcher of the
// model.
func (st *State) watchMachineLifecycle(ctx context.Context, model, parent string, match func(id string) bool, snapshot func(r reader) ([]idLife, error)) (*watcher.Strings, []string, error) {
	return st.watchLifecycle(ctx, watcher.Filter{
		Kind:   KindMachine,
		Model:  model,
		Parent: parent,
		Fields: lifecycleFields,
	}, match, func(r reader) ([]idLife, error) {
		if _, err := getModelHead(r, model); err != nil {
			return nil, err
		}
		return snapshot(r)
	})
}

// WatchModelMachines watches the lifecycle of a model's top-level
// machines. It returns the watcher and the initial ids.
func (st *State) WatchModelMachines(ctx context.Context, model string) (*watcher.Strings, []string, error) {
	return st.watchMachineLifecycle(ctx, model, "", func(id string) bool { return ParentID(id) == "" },
		func(r reader) ([]idLife, error) { return machineLives(r, model, "") })
}

// WatchContainers watches the lifecycle of the direct containers of
// machine parent, of type ctype ("": any type).
func (st *State) WatchContainers(ctx context.Context, model, parent, ctype string) (*watcher.Strings, []string, error) {
	match := func(id string) bool {
		return ParentID(id) == parent && (ctype == "" || ContainerTypeOf(id) == ctype)
	}
	snapshot := func(r reader) ([]idLife, error) {
		if err := machineExists(r, model, parent); err != nil {
			return nil, err
		}
		return machineLives(r, model, parent+"/")
	}
	return st.watchMachineLifecycle(ctx, model, parent, match, snapshot)
}

// startTimeFields is the Fields of WatchModelMachineStartTimes's filter,
// shared by every such watcher.
var startTimeFields = []string{watcher.FieldCreated, watcher.FieldLife, watcher.FieldRemoved, FieldAgentStartTime}

// WatchModelMachineStartTimes watches the top-level machines of a model
// for changes to their life or agent start time. Changes are batched: the
// first change arms a timer of quiesce on clock, and every id changed until
// it fires is delivered as one event. The initial ids are every top-level
// machine.
func (st *State) WatchModelMachineStartTimes(ctx context.Context, model string, clock watcher.Clock, quiesce time.Duration) (*watcher.Strings, []string, error) {
	w := watcher.NewStrings()
	// Made before the subscription: stopping w cancels the subscription
	// first, then the batch's timer (OnStop functions run last first).
	batch := watcher.NewBatch(w, clock, quiesce)
	sink := func(_ uint64, c watcher.Change) {
		if ParentID(c.ID) == "" {
			batch.Add(c.ID)
		}
	}
	s := st.subscribeStamped(w, sink, watcher.Filter{
		Kind:   KindMachine,
		Model:  model,
		Fields: startTimeFields,
	})
	initial := []string{}
	err := st.viewStamped(ctx, s, func(r reader) error {
		if _, err := getModelHead(r, model); err != nil {
			return err
		}
		ms, err := machines(r, model)
		for _, m := range ms {
			if !m.IsContainer() {
				initial = append(initial, m.ID)
			}
		}
		return err
	})
	if err != nil {
		_ = w.Stop()
		return nil, nil, err
	}
	return w, initial, nil
}
