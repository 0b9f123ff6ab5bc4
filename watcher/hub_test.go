package watcher_test

import (
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/watcher"
	"github.com/provisiond/provisiond/watcher/watchertest"
)

const (
	kindMachine watcher.Kind = "machine"
	kindApp     watcher.Kind = "application"
	model1                   = "model-1"
	model2                   = "model-2"
)

// delivery is one call of a Sink.
type delivery struct {
	Rev    uint64
	Change watcher.Change
}

// recorder is a Sink that records every call.
type recorder struct {
	mu  sync.Mutex
	got []delivery
}

func (r *recorder) sink(rev uint64, c watcher.Change) {
	r.mu.Lock()
	r.got = append(r.got, delivery{rev, c})
	r.mu.Unlock()
}

func (r *recorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func (r *recorder) assert(t *testing.T, name string, want ...delivery) {
	t.Helper()
	if got := r.deliveries(); !reflect.DeepEqual(got, want) {
		t.Errorf("%s got deliveries\n\t%+v\nwant\n\t%+v", name, got, want)
	}
}

func TestHubDeliversOnlyMatchingChanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		filter watcher.Filter
		change watcher.Change
		want   bool
	}{{
		name:   "kind and model",
		filter: watcher.Filter{Kind: kindMachine, Model: model1},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "0"},
		want:   true,
	}, {
		name:   "other kind",
		filter: watcher.Filter{Kind: kindMachine, Model: model1},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "0"},
	}, {
		name:   "other model",
		filter: watcher.Filter{Kind: kindMachine, Model: model1},
		change: watcher.Change{Kind: kindMachine, Model: model2, ID: "0"},
	}, {
		name:   "empty model matches only the empty model",
		filter: watcher.Filter{Kind: kindMachine},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "0"},
	}, {
		name:   "id",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "0"},
		want:   true,
	}, {
		name:   "other id",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1"},
	}, {
		name:   "id is not a prefix",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, ID: "1"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "10"},
	}, {
		name:   "id of another kind",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "0"},
	}, {
		name:   "id in another model",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"},
		change: watcher.Change{Kind: kindMachine, Model: model2, ID: "0"},
	}, {
		name:   "fields: first of any",
		filter: watcher.Filter{Kind: kindApp, Model: model1, Fields: []string{watcher.FieldLife, "scale"}},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "a", Fields: []string{watcher.FieldLife}},
		want:   true,
	}, {
		name:   "fields: second of any",
		filter: watcher.Filter{Kind: kindApp, Model: model1, Fields: []string{watcher.FieldLife, "scale"}},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "a", Fields: []string{"charm", "scale"}},
		want:   true,
	}, {
		name:   "fields: none of them",
		filter: watcher.Filter{Kind: kindApp, Model: model1, Fields: []string{watcher.FieldLife, "scale"}},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "a", Fields: []string{"charm"}},
	}, {
		name:   "fields: change names none",
		filter: watcher.Filter{Kind: kindApp, Model: model1, Fields: []string{watcher.FieldLife}},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "a"},
	}, {
		name:   "no fields in filter matches any fields",
		filter: watcher.Filter{Kind: kindApp, Model: model1},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "a", Fields: []string{watcher.FieldRemoved}},
		want:   true,
	}, {
		name:   "id and fields",
		filter: watcher.Filter{Kind: kindApp, Model: model1, ID: "a", Fields: []string{watcher.FieldCreated}},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "a", Fields: []string{watcher.FieldCreated, watcher.FieldLife}},
		want:   true,
	}, {
		name:   "id matches, fields do not",
		filter: watcher.Filter{Kind: kindApp, Model: model1, ID: "a", Fields: []string{watcher.FieldCreated}},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "a", Fields: []string{watcher.FieldLife}},
	}, {
		name:   "fields match, id does not",
		filter: watcher.Filter{Kind: kindApp, Model: model1, ID: "a", Fields: []string{watcher.FieldLife}},
		change: watcher.Change{Kind: kindApp, Model: model1, ID: "b", Fields: []string{watcher.FieldLife}},
	}, {
		name:   "parent",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1"},
		want:   true,
	}, {
		name:   "other parent",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "10/lxd/0", Parent: "10"},
	}, {
		name:   "parent: a change without one",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1"},
	}, {
		name:   "parent is not the id",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1", Parent: ""},
	}, {
		name:   "parent in another model",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1"},
		change: watcher.Change{Kind: kindMachine, Model: model2, ID: "1/lxd/0", Parent: "1"},
	}, {
		name:   "parent and fields",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1", Fields: []string{watcher.FieldCreated}},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1", Fields: []string{watcher.FieldCreated}},
		want:   true,
	}, {
		name:   "parent matches, fields do not",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1", Fields: []string{watcher.FieldCreated}},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1", Fields: []string{"status"}},
	}, {
		name:   "id and parent: both must match",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "2"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1"},
	}, {
		name:   "id and parent",
		filter: watcher.Filter{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1"},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1"},
		want:   true,
	}, {
		name:   "kind-wide sees changes with a parent",
		filter: watcher.Filter{Kind: kindMachine, Model: model1},
		change: watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1"},
		want:   true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hub := watcher.NewHub()
			var r recorder
			cancel := hub.Subscribe(tt.filter, r.sink)
			defer cancel()
			hub.Publish(watcher.ChangeSet{Rev: 7, Changes: []watcher.Change{tt.change}})
			var want []delivery
			if tt.want {
				want = []delivery{{7, tt.change}}
			}
			r.assert(t, "sink", want...)
		})
	}
}

func TestHubIDIndexedAndKindWideBothFire(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	var all, first0, second0, only1 recorder
	for _, sub := range []struct {
		filter watcher.Filter
		sink   watcher.Sink
	}{
		{watcher.Filter{Kind: kindMachine, Model: model1}, all.sink},
		{watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"}, first0.sink},
		{watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"}, second0.sink},
		{watcher.Filter{Kind: kindMachine, Model: model1, ID: "1"}, only1.sink},
	} {
		t.Cleanup(hub.Subscribe(sub.filter, sub.sink))
	}
	m0 := watcher.Change{Kind: kindMachine, Model: model1, ID: "0"}
	m1 := watcher.Change{Kind: kindMachine, Model: model1, ID: "1"}
	m2 := watcher.Change{Kind: kindMachine, Model: model1, ID: "2"}
	hub.Publish(watcher.ChangeSet{Rev: 1, Changes: []watcher.Change{m0}})
	hub.Publish(watcher.ChangeSet{Rev: 2, Changes: []watcher.Change{m1, m2}})

	all.assert(t, "kind-wide", delivery{1, m0}, delivery{2, m1}, delivery{2, m2})
	first0.assert(t, "first on id 0", delivery{1, m0})
	second0.assert(t, "second on id 0", delivery{1, m0})
	only1.assert(t, "on id 1", delivery{2, m1})
}

func TestHubParentIndexedIDIndexedAndKindWideAllFire(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	var all, on1, on1again, on2, entity recorder
	for _, sub := range []struct {
		filter watcher.Filter
		sink   watcher.Sink
	}{
		{watcher.Filter{Kind: kindMachine, Model: model1}, all.sink},
		{watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1"}, on1.sink},
		{watcher.Filter{Kind: kindMachine, Model: model1, Parent: "1"}, on1again.sink},
		{watcher.Filter{Kind: kindMachine, Model: model1, Parent: "2"}, on2.sink},
		{watcher.Filter{Kind: kindMachine, Model: model1, ID: "1/lxd/0"}, entity.sink},
	} {
		t.Cleanup(hub.Subscribe(sub.filter, sub.sink))
	}
	host := watcher.Change{Kind: kindMachine, Model: model1, ID: "1"}
	c10 := watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0", Parent: "1"}
	c20 := watcher.Change{Kind: kindMachine, Model: model1, ID: "2/lxd/0", Parent: "2"}
	nested := watcher.Change{Kind: kindMachine, Model: model1, ID: "1/lxd/0/kvm/0", Parent: "1/lxd/0"}
	hub.Publish(watcher.ChangeSet{Rev: 1, Changes: []watcher.Change{host, c10}})
	hub.Publish(watcher.ChangeSet{Rev: 2, Changes: []watcher.Change{c20, nested}})

	all.assert(t, "kind-wide", delivery{1, host}, delivery{1, c10}, delivery{2, c20}, delivery{2, nested})
	on1.assert(t, "first on parent 1", delivery{1, c10})
	on1again.assert(t, "second on parent 1", delivery{1, c10})
	on2.assert(t, "on parent 2", delivery{2, c20})
	entity.assert(t, "on id 1/lxd/0", delivery{1, c10})
}

func TestHubAllModels(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	var any, anyLife, one recorder
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindMachine, AllModels: true}, any.sink))
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindMachine, AllModels: true, Fields: []string{watcher.FieldLife}}, anyLife.sink))
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, one.sink))
	m1 := watcher.Change{Kind: kindMachine, Model: model1, ID: "0"}
	m2 := watcher.Change{Kind: kindMachine, Model: model2, ID: "0", Fields: []string{watcher.FieldLife}}
	app := watcher.Change{Kind: kindApp, Model: model2, ID: "a"}
	ctrl := watcher.Change{Kind: kindMachine, ID: "c"} // a controller-wide change of the kind
	hub.Publish(watcher.ChangeSet{Rev: 1, Changes: []watcher.Change{m1, app}})
	hub.Publish(watcher.ChangeSet{Rev: 2, Changes: []watcher.Change{m2, ctrl}})

	any.assert(t, "all models", delivery{1, m1}, delivery{2, m2}, delivery{2, ctrl})
	anyLife.assert(t, "all models, life only", delivery{2, m2})
	one.assert(t, "model 1", delivery{1, m1})
}

func TestHubCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		filter watcher.Filter
	}{
		{"kind-wide", watcher.Filter{Kind: kindMachine, Model: model1}},
		{"id-indexed", watcher.Filter{Kind: kindMachine, Model: model1, ID: "0/lxd/0"}},
		{"parent-indexed", watcher.Filter{Kind: kindMachine, Model: model1, Parent: "0"}},
		{"all-models", watcher.Filter{Kind: kindMachine, AllModels: true}},
	}
	change := watcher.Change{Kind: kindMachine, Model: model1, ID: "0/lxd/0", Parent: "0"}
	publish := func(hub *watcher.Hub, rev uint64) {
		hub.Publish(watcher.ChangeSet{Rev: rev, Changes: []watcher.Change{change}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hub := watcher.NewHub()
			var cancelled, kept recorder
			cancel := hub.Subscribe(tt.filter, cancelled.sink)
			keep := hub.Subscribe(tt.filter, kept.sink)
			publish(hub, 1)

			cancel()
			publish(hub, 2)
			cancel() // idempotent: no panic, no second decrement
			if got := hub.Subscriptions(); got != 1 {
				t.Errorf("after cancelling one of two twice, Subscriptions() = %d, want 1", got)
			}
			publish(hub, 3)
			cancelled.assert(t, "cancelled sink", delivery{1, change})
			kept.assert(t, "other sink", delivery{1, change}, delivery{2, change}, delivery{3, change})

			keep()
			if got := hub.Subscriptions(); got != 0 {
				t.Errorf("after cancelling both, Subscriptions() = %d, want 0", got)
			}
			publish(hub, 4)
			kept.assert(t, "other sink", delivery{1, change}, delivery{2, change}, delivery{3, change})

			// The emptied index entries must not break a new subscription.
			var again recorder
			t.Cleanup(hub.Subscribe(tt.filter, again.sink))
			publish(hub, 5)
			again.assert(t, "new sink", delivery{5, change})
		})
	}
}

// A retired hub (a stopping daemon's) cancels nothing: the subscription
// stays and a publish still reaches it.
func TestHubRetire(t *testing.T) {
	hub := watcher.NewHub()
	var r recorder
	change := watcher.Change{Kind: kindMachine, Model: model1, ID: "0"}
	cancel := hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, r.sink)
	hub.Retire()
	cancel()
	if got := hub.Subscriptions(); got != 1 {
		t.Errorf("cancelled after Retire: Subscriptions() = %d, want 1", got)
	}
	hub.Publish(watcher.ChangeSet{Rev: 1, Changes: []watcher.Change{change}})
	r.assert(t, "sink", delivery{1, change})
}

func TestHubCancelConcurrentlyIsIdempotent(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	keep := hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, func(uint64, watcher.Change) {})
	defer keep()
	cancel := hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"}, func(uint64, watcher.Change) {})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(cancel)
	}
	wg.Wait()
	if got := hub.Subscriptions(); got != 1 {
		t.Errorf("Subscriptions() = %d, want 1", got)
	}
}

func TestHubSubscriptions(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	if got := hub.Subscriptions(); got != 0 {
		t.Fatalf("new hub: Subscriptions() = %d, want 0", got)
	}
	nop := func(uint64, watcher.Change) {}
	filters := []watcher.Filter{
		{Kind: kindMachine, Model: model1},
		{Kind: kindMachine, Model: model1}, // a second on the same key counts
		{Kind: kindApp, Model: model2},
		{Kind: kindMachine, Model: model1, ID: "0"},
		{Kind: kindMachine, Model: model1, ID: "0"},
		{Kind: kindMachine, Model: model1, ID: "1", Fields: []string{watcher.FieldLife}},
		{Kind: kindMachine, Model: model1, Parent: "1"},
		{Kind: kindMachine, Model: model1, Parent: "1"},
	}
	var cancels []func()
	for i, f := range filters {
		cancels = append(cancels, hub.Subscribe(f, nop))
		if got, want := hub.Subscriptions(), i+1; got != want {
			t.Errorf("after subscribing %+v: Subscriptions() = %d, want %d", f, got, want)
		}
	}
	// Cancel out of order, each twice.
	for i, j := range []int{3, 6, 0, 5, 1, 7, 4, 2} {
		cancels[j]()
		cancels[j]()
		if got, want := hub.Subscriptions(), len(filters)-i-1; got != want {
			t.Errorf("after cancelling %+v: Subscriptions() = %d, want %d", filters[j], got, want)
		}
	}
}

func TestHubPublishOrder(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	var kindWide, onID recorder
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, kindWide.sink))
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"}, onID.sink))

	m := func(id string, fields ...string) watcher.Change {
		return watcher.Change{Kind: kindMachine, Model: model1, ID: id, Fields: fields}
	}
	app := watcher.Change{Kind: kindApp, Model: model1, ID: "0"}
	other := watcher.Change{Kind: kindMachine, Model: model2, ID: "0"}
	sets := []watcher.ChangeSet{
		{Rev: 1, Changes: []watcher.Change{m("0", watcher.FieldCreated), app, m("1", watcher.FieldCreated), other}},
		{Rev: 2},
		{Rev: 3, Changes: []watcher.Change{m("2"), m("0", watcher.FieldLife)}},
		{Rev: 4, Changes: []watcher.Change{other, m("1", watcher.FieldLife), m("0", watcher.FieldRemoved), m("1", watcher.FieldRemoved)}},
	}
	for _, cs := range sets {
		hub.Publish(cs)
	}
	kindWide.assert(t, "kind-wide sink",
		delivery{1, m("0", watcher.FieldCreated)},
		delivery{1, m("1", watcher.FieldCreated)},
		delivery{3, m("2")},
		delivery{3, m("0", watcher.FieldLife)},
		delivery{4, m("1", watcher.FieldLife)},
		delivery{4, m("0", watcher.FieldRemoved)},
		delivery{4, m("1", watcher.FieldRemoved)},
	)
	onID.assert(t, "id sink",
		delivery{1, m("0", watcher.FieldCreated)},
		delivery{3, m("0", watcher.FieldLife)},
		delivery{4, m("0", watcher.FieldRemoved)},
	)
}

// TestHubWatcherSinks wires the coalescing watchers to a hub the way state
// does: subscribe with the watcher's sink, cancel on stop.
func TestHubWatcherSinks(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	nw := watcher.NewNotify()
	nw.OnStop(hub.Subscribe(watcher.Filter{Kind: kindApp, Model: model1, ID: "a", Fields: []string{"scale"}}, nw.Sink()))
	sw := watcher.NewStrings()
	sw.OnStop(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, Fields: []string{watcher.FieldLife}}, sw.Sink()))
	defer nw.Stop()
	defer sw.Stop()

	life := func(id string) watcher.Change {
		return watcher.Change{Kind: kindMachine, Model: model1, ID: id, Fields: []string{watcher.FieldLife}}
	}
	scale := watcher.Change{Kind: kindApp, Model: model1, ID: "a", Fields: []string{"scale"}}
	hub.Publish(watcher.ChangeSet{Rev: 1, Changes: []watcher.Change{life("2"), scale, life("10")}})
	hub.Publish(watcher.ChangeSet{Rev: 2, Changes: []watcher.Change{scale, life("2")}})
	watchertest.NotifyAssertChange(t, nw)
	watchertest.NotifyAssertNoChange(t, nw)
	watchertest.StringsAssertChange(t, sw, "2", "10")
	watchertest.StringsAssertNoChange(t, sw)

	if got := hub.Subscriptions(); got != 2 {
		t.Fatalf("Subscriptions() = %d, want 2", got)
	}
	_ = nw.Stop()
	_ = sw.Stop()
	if got := hub.Subscriptions(); got != 0 {
		t.Errorf("after stopping the watchers, Subscriptions() = %d, want 0", got)
	}
	hub.Publish(watcher.ChangeSet{Rev: 3, Changes: []watcher.Change{scale, life("3")}})
	watchertest.AssertStopped(t, nw.Next(t.Context()))
	_, err := sw.Next(t.Context())
	watchertest.AssertStopped(t, err)
}

// TestHubConcurrent publishes, subscribes, counts and cancels from many
// goroutines at once. Run it under -race; it also fails on deadlock, and if
// a sink is called after its cancel has returned.
func TestHubConcurrent(t *testing.T) {
	t.Parallel()
	const (
		publishers = 16
		churners   = 32
		watchers   = 8
		rounds     = 200
	)
	hub := watcher.NewHub()
	var seen atomic.Int64
	cancelSeen := hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, func(uint64, watcher.Change) { seen.Add(1) })
	var seen0 atomic.Int64
	cancelSeen0 := hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"}, func(uint64, watcher.Change) { seen0.Add(1) })
	var seenOn0 atomic.Int64
	cancelSeenOn0 := hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, Parent: "0"}, func(uint64, watcher.Change) { seenOn0.Add(1) })

	var lateCalls, badCounts atomic.Int64
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range rounds {
				hub.Publish(watcher.ChangeSet{Rev: uint64(p*rounds + i), Changes: []watcher.Change{
					{Kind: kindMachine, Model: model1, ID: strconv.Itoa(i % 10), Fields: []string{watcher.FieldLife}},
					{Kind: kindApp, Model: model1, ID: "a"},
					{Kind: kindMachine, Model: model1, ID: strconv.Itoa(i%10) + "/lxd/0", Parent: strconv.Itoa(i % 10)},
				}})
			}
		})
	}
	for c := range churners {
		wg.Go(func() {
			for i := range rounds {
				f := watcher.Filter{Kind: kindMachine, Model: model1}
				switch (c + i) % 3 {
				case 0:
					f.ID = strconv.Itoa(i % 10)
				case 1:
					f.Parent = strconv.Itoa(i % 10)
				}
				if i%3 == 0 {
					f.Fields = []string{watcher.FieldLife}
				}
				var cancelled atomic.Bool
				cancel := hub.Subscribe(f, func(uint64, watcher.Change) {
					if cancelled.Load() {
						lateCalls.Add(1)
					}
				})
				if hub.Subscriptions() < 4 { // the three long-lived ones and this one
					badCounts.Add(1)
				}
				cancel()
				cancelled.Store(true)
				cancel()
			}
		})
	}
	for range watchers {
		wg.Go(func() {
			for i := range rounds {
				w := watcher.NewNotify()
				w.OnStop(hub.Subscribe(watcher.Filter{Kind: kindApp, Model: model1, ID: "a"}, w.Sink()))
				if i%2 == 0 {
					_ = w.Stop()
					continue
				}
				go w.Stop() // stop racing with publishers and with Kill
				w.Kill(nil)
			}
		})
	}

	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("deadlock: goroutines still running after 60s\n%s", buf[:runtime.Stack(buf, true)])
	}

	if got, want := seen.Load(), int64(2*publishers*rounds); got != want {
		t.Errorf("kind-wide sink saw %d changes, want %d", got, want)
	}
	if got, want := seen0.Load(), int64(publishers*rounds/10); got != want {
		t.Errorf("id sink saw %d changes, want %d", got, want)
	}
	if got, want := seenOn0.Load(), int64(publishers*rounds/10); got != want {
		t.Errorf("parent sink saw %d changes, want %d", got, want)
	}
	if n := lateCalls.Load(); n != 0 {
		t.Errorf("%d sink calls after cancel returned", n)
	}
	if n := badCounts.Load(); n != 0 {
		t.Errorf("%d times Subscriptions() was lower than the live subscriptions", n)
	}
	cancelSeen()
	cancelSeenOn0()
	cancelSeen0()
	// Stops launched with "go w.Stop()" may still be finishing; a stopped
	// watcher has cancelled by the time Kill returns, so the count is exact.
	if got := hub.Subscriptions(); got != 0 {
		t.Errorf("after all cancels, Subscriptions() = %d, want 0", got)
	}
}

// Sync returns at once when no publish is under way, and otherwise once
// the publish under way has called every sink: a consumer of what a
// commit's sinks hand on then has all of it. Sync waits for Reset too.
func TestHubSyncWaitsForThePublishUnderWay(t *testing.T) {
	t.Parallel()
	hub := watcher.NewHub()
	hub.Sync() // nothing under way

	inSink, release := make(chan struct{}), make(chan struct{})
	var delivered atomic.Int32
	first := true
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, func(uint64, watcher.Change) {
		if first {
			first = false
			close(inSink)
			<-release
		}
		delivered.Add(1)
	}))
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, func(uint64, watcher.Change) {
		delivered.Add(1)
	}))
	published := make(chan struct{})
	go func() {
		defer close(published)
		hub.Publish(watcher.ChangeSet{Rev: 1, Changes: []watcher.Change{{Kind: kindMachine, Model: model1, ID: "0"}}})
	}()
	<-inSink
	synced := make(chan struct{})
	go func() {
		hub.Sync()
		close(synced)
	}()
	select {
	case <-synced:
		t.Fatal("Sync returned while a sink of the publish was running")
	case <-time.After(50 * time.Millisecond): // Sync must still be waiting
	}
	close(release)
	select {
	case <-synced:
	case <-time.After(10 * time.Second):
		t.Fatal("Sync still waiting 10s after the publish ended")
	}
	if got := delivered.Load(); got != 2 {
		t.Fatalf("Sync returned after %d of 2 deliveries", got)
	}
	<-published
	hub.Sync() // nothing under way again

	// Reset is a publish too.
	inSink2, release2 := make(chan struct{}), make(chan struct{})
	t.Cleanup(hub.Subscribe(watcher.Filter{Kind: kindApp, Model: model2}, func(uint64, watcher.Change) {
		close(inSink2)
		<-release2
	}))
	go hub.Reset(2)
	<-inSink2
	synced2 := make(chan struct{})
	go func() {
		hub.Sync()
		close(synced2)
	}()
	close(release2)
	select {
	case <-synced2:
	case <-time.After(10 * time.Second):
		t.Fatal("Sync still waiting 10s after the reset ended")
	}
}
