package state

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// A machine's removal, as Juju sequences it (state/machineremovals.go,
// worker/machineundertaker): once the machine is dead its provisioner
// stops the instance and marks the machine for removal
// (MarkMachineForRemoval); the machine undertaker then releases what the
// provider gave the machine and completes the removal
// (CompleteMachineRemovals), which removes the machine and everything
// recorded of it in one transaction. Until then status shows the machine
// dead and marked.

// MachineRemoval is one machine CompleteMachineRemovals removed.
type MachineRemoval struct {
	ID string
	// HostInstanceID is the instance of a container's host (empty for a
	// top-level machine, or an unprovisioned host): where the provider
	// routed the container's addresses.
	HostInstanceID string
	// Released are the IP addresses that were allocated to it, now free.
	Released []IPAddress
}

// CompleteMachineRemovals removes the machines ids of model that are
// marked for removal, in one transaction that checks, for each, that it is
// still dead and marked: its allocated IP addresses are released, its
// volumes detached, its own container id sequences deleted, and its record
// (instance data, status records, link-layer devices, supported
// containers) removed; a container's host keeps no record of it (hosts'
// containers are found by id). As Juju's, it is idempotent: a machine that
// no longer exists is skipped, so removing a machine twice (two
// undertakers, a retry) is a no-op the second time. A machine that exists
// but is not marked fails the whole call ("cannot remove machine 3: not
// marked for removal") and removes nothing; so does an invalid id. It
// returns the machines it removed, in the order given.
func (st *State) CompleteMachineRemovals(ctx context.Context, model string, ids []string) ([]MachineRemoval, error) {
	var invalid []string
	for _, id := range ids {
		if !validMachineID(id) {
			invalid = append(invalid, id)
		}
	}
	if len(invalid) > 0 {
		return nil, errors.Errorf("Invalid machine id%s: %s", pluralS(len(invalid)), strings.Join(invalid, ", "))
	}
	var out []MachineRemoval
	err := st.update(ctx, func(tx *txn) error {
		out = nil
		var notMarked []string
		for _, id := range ids {
			d, err := getMachine(tx, model, id)
			switch {
			case errors.Is(err, errors.NotFound):
				continue // gone already (or never was): nothing to do
			case err != nil:
				return err
			case !d.MarkedForRemoval:
				notMarked = append(notMarked, id)
				continue
			}
			if len(notMarked) > 0 {
				continue // the call fails: remove nothing more
			}
			r := MachineRemoval{ID: id}
			if parent := ParentID(id); parent != "" {
				if host, err := getMachine(tx, model, parent); err == nil {
					r.HostInstanceID = host.InstanceID
				} else if !errors.Is(err, errors.NotFound) {
					return err
				}
			}
			if r.Released, err = tx.removeMachine(model, id); err != nil {
				return err
			}
			out = append(out, r)
		}
		if len(notMarked) > 0 {
			SortMachineIDs(notMarked)
			return errors.Errorf("cannot remove machine%s %s: not marked for removal",
				pluralS(len(notMarked)), strings.Join(notMarked, ", "))
		}
		if len(out) == 0 {
			return errNoChange
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pluralS is "s" unless n is 1.
func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// removeContainerSequences deletes the id sequences of machine id's
// containers ("<id>/lxd/N"): they go with the machine, whose id is never
// handed out again.
func (tx *txn) removeContainerSequences(model, id string) error {
	keys, err := scanKeys(tx, store.Key(kindSequence, model+"/container/"+id+"/"))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.Delete(k); err != nil {
			return errors.Trace(err)
		}
	}
	return nil
}

// machineMark is what the removal queries read of a machine's record.
type machineMark struct {
	Model            string `json:"model"`
	ID               string `json:"id"`
	MarkedForRemoval bool   `json:"marked-for-removal,omitempty"`
}

// markedKey is how a marked machine's record says so: only records that
// contain it are decoded by the removal queries (it is written only when
// true).
var markedKey = []byte(`"marked-for-removal":true`)

// scanMarked calls fn for each machine marked for removal whose key
// starts with prefix, in key order.
func scanMarked(r reader, prefix string, fn func(m machineMark)) error {
	return scan(r, prefix, func(key string, b []byte) error {
		if !bytes.Contains(b, markedKey) {
			return nil
		}
		var m machineMark
		if err := decodeRecord(key, b, &m); err != nil {
			return errors.Annotatef(err, "decoding %s %q", KindMachine, key)
		}
		if m.MarkedForRemoval {
			fn(m)
		}
		return nil
	})
}

// MachineRemovals lists the ids of a model's machines marked for removal,
// in id order.
func (st *State) MachineRemovals(ctx context.Context, model string) ([]string, error) {
	var out []string
	err := st.view(ctx, func(r reader) error {
		if _, err := getModelHead(r, model); err != nil {
			return err
		}
		return scanMarked(r, kindPrefix(KindMachine, model), func(m machineMark) { out = append(out, m.ID) })
	})
	SortMachineIDs(out)
	return out, err
}

// AllMachineRemovals lists the machines marked for removal in every
// model, by model UUID, each model's in id order (the sweep of the
// controller's machine undertaker).
func (st *State) AllMachineRemovals(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	err := st.view(ctx, func(r reader) error {
		return scanMarked(r, string(KindMachine)+"/", func(m machineMark) { out[m.Model] = append(out[m.Model], m.ID) })
	})
	for _, ids := range out {
		SortMachineIDs(ids)
	}
	return out, err
}

// WatchMachineRemovals fires when a machine of model is marked for
// removal or a machine is removed (Juju's fires when a removal is added
// or completed; a removal that was never marked fires it too, which costs
// its client one AllMachineRemovals). The caller reads the removals
// itself: what was committed before the call returned does not fire it.
func (st *State) WatchMachineRemovals(ctx context.Context, model string) (*watcher.Notify, error) {
	return st.notifyInModel(ctx, model, watcher.Filter{Kind: KindMachine, Model: model, Fields: removalFields})
}

var removalFields = []string{FieldRemovalMark, watcher.FieldRemoved}

// Controller config of the machine undertaker.
const (
	// MachineUndertakerKey says who completes machine removals: the
	// controller's own undertaker (MachineUndertakerBuiltin, the default
	// when unset) or only an external one, a controller agent running
	// Juju's worker against the MachineUndertaker facade
	// (MachineUndertakerExternal).
	MachineUndertakerKey      = "machine-undertaker"
	MachineUndertakerBuiltin  = "builtin"
	MachineUndertakerExternal = "external"
)

// BuiltinMachineUndertaker reports whether the controller config lets the
// controller's own machine undertaker complete removals.
func BuiltinMachineUndertaker(config map[string]any) bool {
	v, ok := config[MachineUndertakerKey]
	return !ok || v != MachineUndertakerExternal
}

// checkControllerConfig refuses values set in the controller config that
// the controller itself reads and cannot use.
func checkControllerConfig(config map[string]any) error {
	if v, ok := config[MachineUndertakerKey]; ok {
		if s, _ := v.(string); !slices.Contains([]string{MachineUndertakerBuiltin, MachineUndertakerExternal}, s) {
			return errors.NewNotValid(nil, fmt.Sprintf("controller config %s: %v: want %q or %q",
				MachineUndertakerKey, v, MachineUndertakerBuiltin, MachineUndertakerExternal))
		}
	}
	return nil
}
