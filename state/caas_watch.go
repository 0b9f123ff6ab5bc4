package state

import (
	"sync"

	"github.com/provisiond/provisiond/watcher"
)

// Watchers of Kubernetes applications (specs/caasunitprovisioner.md §6).
// Each subscribes first, then reads; a Notify has no initial event pending
// (the Watch call is the initial event).

// WatchApplications watches the lifecycle of a model's applications: the
// initial ids are every application (any life); later, applications
// added, whose life changed, or removed.
func (st *State) WatchApplications(model string) (*watcher.Strings, []string, error) {
	w := watcher.NewStrings()
	l := &lifecycle{w: w, match: func(string) bool { return true }, known: map[string]bool{}}
	w.OnStop(st.hub.Subscribe(watcher.Filter{
		Kind:   KindApplication,
		Model:  model,
		Fields: []string{watcher.FieldCreated, watcher.FieldLife, watcher.FieldRemoved},
	}, l.sink))
	var apps []Application
	err := st.view(func(r reader) error {
		if _, err := getModel(r, model); err != nil {
			return err
		}
		docs, err := list[applicationDoc](r, KindApplication, model)
		for _, d := range docs {
			apps = append(apps, d.Application)
		}
		return err
	})
	if err != nil {
		_ = w.Stop()
		return nil, nil, err
	}
	initial := []string{}
	l.mu.Lock()
	for _, a := range apps {
		initial = append(initial, a.Name)
		if a.Life != Dead {
			l.known[a.Name] = true
		}
	}
	l.mu.Unlock()
	return w, initial, nil
}

// notifyOn subscribes a Notify to filter, then checks that the
// application exists (when check is set).
func (st *State) notifyOn(f watcher.Filter, model, app string, check bool) (*watcher.Notify, error) {
	w := watcher.NewNotify()
	w.OnStop(st.hub.Subscribe(f, w.Sink()))
	if check {
		if _, err := st.Application(model, app); err != nil {
			_ = w.Stop()
			return nil, err
		}
	}
	return w, nil
}

// WatchApplication fires on any change to an application's record (its
// life, scale, charm, constraints, resources flag): not on its config,
// spec, service, status or units, which are records of their own.
func (st *State) WatchApplication(model, app string) (*watcher.Notify, error) {
	return st.notifyOn(watcher.Filter{Kind: KindApplication, Model: model, ID: app}, model, app, true)
}

// WatchApplicationScale fires when an application's desired scale
// changes (a change is recorded only when the value differs).
func (st *State) WatchApplicationScale(model, app string) (*watcher.Notify, error) {
	return st.notifyOn(watcher.Filter{Kind: KindApplication, Model: model, ID: app, Fields: []string{FieldScale}}, model, app, true)
}

// WatchPodSpec fires on any change to an application's spec record. The
// application need not exist: the watcher fires when its spec appears.
func (st *State) WatchPodSpec(model, app string) (*watcher.Notify, error) {
	return st.notifyOn(watcher.Filter{Kind: KindPodSpec, Model: model, ID: app}, model, app, false)
}

// WatchApplicationTrustHash watches the hash of an application's config:
// it returns the watcher and the current hash, then delivers the latest
// hash each time it changes.
func (st *State) WatchApplicationTrustHash(model, app string) (*watcher.Strings, string, error) {
	w := watcher.NewStrings()
	var (
		mu   sync.Mutex
		last string
		set  bool
		seen []string // hashes seen before the initial read
	)
	w.OnStop(st.hub.Subscribe(watcher.Filter{Kind: KindApplicationConfig, Model: model, ID: app}, func(_ uint64, c watcher.Change) {
		h, ok := hashField(c)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !set {
			seen = append(seen, h)
			return
		}
		if h != last {
			last = h
			w.Replace(h)
		}
	}))
	if _, err := st.Application(model, app); err != nil {
		_ = w.Stop()
		return nil, "", err
	}
	h, err := st.ApplicationConfigHash(model, app)
	if err != nil {
		_ = w.Stop()
		return nil, "", err
	}
	mu.Lock()
	last, set = h, true
	// A change published between subscribing and reading is in the read
	// or later: at worst a spurious event carrying the current hash.
	if len(seen) > 0 {
		w.Replace(h)
	}
	mu.Unlock()
	return w, h, nil
}
