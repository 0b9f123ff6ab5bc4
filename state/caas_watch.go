package state

import (
	"context"
	"sync"

	"github.com/provisiond/provisiond/watcher"
)

// Watchers of Kubernetes applications (specs/caasunitprovisioner.md §6).
// Each subscribes first, then reads; a Notify has no initial event pending
// (the Watch call is the initial event).

// WatchApplications watches the lifecycle of a model's applications: the
// initial ids are every application (any life); later, applications
// added, whose life changed, or removed.
func (st *State) WatchApplications(ctx context.Context, model string) (*watcher.Strings, []string, error) {
	return st.watchLifecycle(ctx, watcher.Filter{
		Kind:   KindApplication,
		Model:  model,
		Fields: lifecycleFields,
	}, func(string) bool { return true }, func(r reader) ([]idLife, error) {
		if _, err := getModelHead(r, model); err != nil {
			return nil, err
		}
		docs, err := list[applicationDoc](r, KindApplication, model)
		items := make([]idLife, len(docs))
		for i, d := range docs {
			items[i] = idLife{d.Name, d.Life}
		}
		return items, err
	})
}

// notifyOn subscribes a Notify to filter, then checks that the
// application exists (when check is set) and stamps the watcher with the
// revision the check read, or (no check) the revision this process has
// applied. It resumes (resumeNotify).
func (st *State) notifyOn(ctx context.Context, f watcher.Filter, model, app string, check bool) (*watcher.Notify, error) {
	w := watcher.NewNotify()
	s := st.subscribeStamped(w, w.Sink(), f)
	var err error
	if check {
		err = st.viewStamped(ctx, s, func(r reader) error {
			_, err := getApplication(r, model, app)
			return err
		})
	} else {
		st.stampNow(ctx, s)
	}
	if err == nil {
		err = st.resumeNotify(ctx, s, w, f)
	}
	if err != nil {
		_ = w.Stop()
		return nil, err
	}
	return w, nil
}

// WatchApplication fires on any change to an application's record (its
// life, scale, charm, constraints, resources flag): not on its config,
// spec, service, status or units, which are records of their own.
func (st *State) WatchApplication(ctx context.Context, model, app string) (*watcher.Notify, error) {
	return st.notifyOn(ctx, watcher.Filter{Kind: KindApplication, Model: model, ID: app}, model, app, true)
}

// scaleFields is the Fields of WatchApplicationScale's filter, shared by
// every such watcher.
var scaleFields = []string{FieldScale}

// WatchApplicationScale fires when an application's desired scale
// changes (a change is recorded only when the value differs).
func (st *State) WatchApplicationScale(ctx context.Context, model, app string) (*watcher.Notify, error) {
	return st.notifyOn(ctx, watcher.Filter{Kind: KindApplication, Model: model, ID: app, Fields: scaleFields}, model, app, true)
}

// WatchPodSpec fires on any change to an application's spec record. The
// application need not exist: the watcher fires when its spec appears.
func (st *State) WatchPodSpec(ctx context.Context, model, app string) (*watcher.Notify, error) {
	return st.notifyOn(ctx, watcher.Filter{Kind: KindPodSpec, Model: model, ID: app}, model, app, false)
}

// WatchApplicationTrustHash watches the hash of an application's config:
// it returns the watcher and the current hash, then delivers the latest
// hash each time it changes. Resumed (watch_resume.go), the current hash
// is pending, the watcher's first event, if the config changed after the
// revision resumed from, and nothing is otherwise.
func (st *State) WatchApplicationTrustHash(ctx context.Context, model, app string) (*watcher.Strings, string, error) {
	w := watcher.NewStrings()
	var (
		mu   sync.Mutex
		last string
	)
	f := watcher.Filter{Kind: KindApplicationConfig, Model: model, ID: app}
	s := st.subscribeStamped(w, func(_ uint64, c watcher.Change) {
		h, ok := hashField(c)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if h != last {
			last = h
			w.Replace(h)
		}
	}, f)
	var h string
	changed, err := st.viewResumable(ctx, s, w, []watcher.Filter{f}, func(r reader) ([]string, error) {
		if _, err := getApplication(r, model, app); err != nil {
			return nil, err
		}
		var d appConfigDoc
		ok, err := get(r, KindApplicationConfig, model, app, &d)
		if err != nil {
			return nil, err
		}
		if ok {
			h = configHash(app, d.Settings)
		}
		// Set before the stamp passes on the changes that came meanwhile.
		mu.Lock()
		last = h
		mu.Unlock()
		return nil, nil
	}, func(watcher.Change) (string, bool) { return h, true })
	if err != nil {
		_ = w.Stop()
		return nil, "", err
	}
	if len(changed) > 0 {
		// Resumed, and the config changed since: the hash is pending,
		// unless a newer one came from the feed after the snapshot.
		mu.Lock()
		if last == h {
			w.Replace(h)
		}
		mu.Unlock()
	}
	return w, h, nil
}
