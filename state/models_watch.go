package state

import "github.com/provisiond/provisiond/watcher"

// WatchModels watches the lifecycle of every model of the controller, as
// Juju's controller agent follows its models to run their workers: the
// initial ids are the UUIDs of every model; later, models added, whose
// life changed (alive to dying), or removed. Config and other changes of
// a model's record are not reported.
func (st *State) WatchModels() (*watcher.Strings, []string, error) {
	w := watcher.NewStrings()
	l := &lifecycle{w: w, match: func(string) bool { return true }, known: map[string]bool{}}
	w.OnStop(st.hub.Subscribe(watcher.Filter{
		Kind:      KindModel,
		AllModels: true,
		Fields:    []string{watcher.FieldCreated, watcher.FieldLife, watcher.FieldRemoved},
	}, l.sink))
	var docs []modelDoc
	err := st.view(func(r reader) error {
		var err error
		docs, err = list[modelDoc](r, KindModel, "")
		return err
	})
	if err != nil {
		_ = w.Stop()
		return nil, nil, err
	}
	initial := make([]string, 0, len(docs))
	l.mu.Lock()
	for _, d := range docs {
		initial = append(initial, d.UUID)
		l.known[d.UUID] = true
	}
	l.mu.Unlock()
	return w, initial, nil
}
