package state

import (
	"context"
	"github.com/provisiond/provisiond/watcher"
)

// WatchModels watches the lifecycle of every model of the controller, as
// Juju's controller agent follows its models to run their workers: the
// initial ids are the UUIDs of every model; later, models added, whose
// life changed (alive to dying), or removed. Config and other changes of
// a model's record are not reported.
func (st *State) WatchModels(ctx context.Context) (*watcher.Strings, []string, error) {
	return st.watchLifecycle(ctx, watcher.Filter{
		Kind:      KindModel,
		AllModels: true,
		Fields:    []string{watcher.FieldCreated, watcher.FieldLife, watcher.FieldRemoved},
	}, func(string) bool { return true }, func(r reader) ([]idLife, error) {
		docs, err := list[modelDoc](r, KindModel, "")
		items := make([]idLife, len(docs))
		for i, d := range docs {
			items[i] = idLife{d.UUID, d.Life}
		}
		return items, err
	})
}
