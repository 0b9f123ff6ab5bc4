package watcher_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/provisiond/provisiond/watcher"
)

// BenchmarkHubPublish publishes one change per op to a hub holding 10,000
// entity subscriptions spread over 1,000 ids (10 per id, found through the
// id index) and one kind-wide subscription: each change reaches 11 sinks.
func BenchmarkHubPublish(b *testing.B) {
	const (
		ids       = 1000
		perID     = 10
		wantSinks = perID + 1
	)
	hub := watcher.NewHub()
	var calls int
	sink := func(uint64, watcher.Change) { calls++ }
	for i := range ids * perID {
		id := strconv.Itoa(i % ids)
		defer hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, ID: id}, sink)()
	}
	defer hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, sink)()
	sets := make([]watcher.ChangeSet, ids)
	for i := range sets {
		sets[i] = watcher.ChangeSet{Rev: uint64(i + 1), Changes: []watcher.Change{
			{Kind: kindMachine, Model: model1, ID: strconv.Itoa(i), Fields: []string{watcher.FieldLife}},
		}}
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		hub.Publish(sets[n%ids])
		n++
	}
	if calls != n*wantSinks {
		b.Fatalf("%d sink calls for %d publishes, want %d each", calls, n, wantSinks)
	}
	b.ReportMetric(float64(calls)/float64(n), "sinks/op")
}

// BenchmarkHubPublishByParent publishes one new container per op to a hub
// holding 10,000 container-watcher subscriptions over 1,000 parents (10 per
// parent, found through the parent index) and one kind-wide subscription:
// each change reaches 11 sinks, whatever the number of parents. This is
// provisionbench's watch workload at 1,000 agents x 10 watchers.
func BenchmarkHubPublishByParent(b *testing.B) {
	const (
		parents   = 1000
		perParent = 10
		wantSinks = perParent + 1
	)
	hub := watcher.NewHub()
	var calls int
	sink := func(uint64, watcher.Change) { calls++ }
	for i := range parents * perParent {
		defer hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, Parent: strconv.Itoa(i % parents),
			Fields: []string{watcher.FieldCreated, watcher.FieldLife, watcher.FieldRemoved}}, sink)()
	}
	defer hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, sink)()
	sets := make([]watcher.ChangeSet, parents)
	for i := range sets {
		p := strconv.Itoa(i)
		sets[i] = watcher.ChangeSet{Rev: uint64(i + 1), Changes: []watcher.Change{
			{Kind: kindMachine, Model: model1, ID: p + "/lxd/0", Parent: p, Fields: []string{watcher.FieldCreated}},
		}}
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		hub.Publish(sets[n%parents])
		n++
	}
	if calls != n*wantSinks {
		b.Fatalf("%d sink calls for %d publishes, want %d each", calls, n, wantSinks)
	}
	b.ReportMetric(float64(calls)/float64(n), "sinks/op")
}

// BenchmarkNotifyTriggerNext is one coalesced wake-up: Trigger, then a Next
// that finds the event pending.
// BenchmarkNotifyTriggerNextAsync: a trigger and the NextAsync that
// consumes it, as the daemon's Next calls wait (one reply function,
// reused here as a connection's is not).
func BenchmarkNotifyTriggerNextAsync(b *testing.B) {
	w := watcher.NewNotify()
	defer w.Stop()
	ctx := context.Background()
	var got error
	done := func(err error) { got = err }
	b.ReportAllocs()
	for b.Loop() {
		w.Trigger()
		w.NextAsync(ctx, done)
		if got != nil {
			b.Fatal(got)
		}
	}
}

// BenchmarkNotifyTriggerNext: the same through the blocking Next, which
// makes a channel and a reply function per call.
func BenchmarkNotifyTriggerNext(b *testing.B) {
	w := watcher.NewNotify()
	defer w.Stop()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		w.Trigger()
		if err := w.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHubCancelStorm is a daemon's stop, or any moment thousands of
// connections end at once: 14,000 goroutines (one per connection's
// teardown) each cancel their 10 container watchers' subscriptions, with
// some work of their own between cancels (a watcher's stop answers its
// waiting Next), while a publisher keeps publishing. One op is the whole
// storm.
func BenchmarkHubCancelStorm(b *testing.B) {
	const (
		conns   = 14000
		perConn = 10
	)
	for b.Loop() {
		b.StopTimer()
		hub := watcher.NewHub()
		sink := func(uint64, watcher.Change) {}
		cancels := make([][]func(), conns)
		for i := range cancels {
			parent := strconv.Itoa(i)
			for range perConn {
				cancels[i] = append(cancels[i], hub.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, Parent: parent}, sink))
			}
		}
		stop := make(chan struct{})
		published := make(chan struct{})
		go func() {
			defer close(published)
			for rev := uint64(1); ; rev++ {
				select {
				case <-stop:
					return
				default:
				}
				hub.Publish(watcher.ChangeSet{Rev: rev, Changes: []watcher.Change{{Kind: kindMachine, Model: model1, ID: "x/lxd/1", Parent: strconv.Itoa(int(rev % conns))}}})
			}
		}()
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range cancels {
			wg.Go(func() {
				<-start
				buf := make([]byte, 0, 256)
				for _, cancel := range cancels[i] {
					cancel()
					for j := range 20 { // the teardown's own work between cancels
						buf = strconv.AppendInt(buf[:0], int64(i*j), 10)
					}
				}
			})
		}
		b.StartTimer()
		close(start)
		wg.Wait()
		b.StopTimer()
		close(stop)
		<-published
		if n := hub.Subscriptions(); n != 0 {
			b.Fatalf("%d subscriptions left", n)
		}
		b.StartTimer()
	}
}
