package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

func TestFeedKeepsTheLastChangesOfEachModel(t *testing.T) {
	hub := watcher.NewHub()
	f := newFeed(hub, time.Now, func(string) {})
	defer f.close()
	l, cancel := f.listen("m1")
	defer cancel()
	for i := range feedSize + 10 {
		hub.Publish(watcher.ChangeSet{Rev: uint64(i + 1), Changes: []watcher.Change{
			{Kind: state.KindMachine, Model: "m1", ID: fmt.Sprint(i), Fields: []string{watcher.FieldCreated}},
			{Kind: state.KindMachine, Model: "m2", ID: fmt.Sprint(i)},
		}})
	}
	select {
	case <-l.wake:
	default:
		t.Fatal("the listener was not woken")
	}
	got, next, lost, models := f.since(l, 0)
	if len(got) != feedSize || got[0].ID != "10" || got[len(got)-1].ID != fmt.Sprint(feedSize+9) || lost || models {
		t.Fatalf("since(0): %d changes from %s, lost %v, models %v", len(got), got[0].ID, lost, models)
	}
	if got, _, _, _ := f.since(l, next); len(got) != 0 {
		t.Errorf("since(next) = %v, want nothing new", got)
	}
	hub.Publish(watcher.ChangeSet{Rev: 999, Changes: []watcher.Change{{Kind: state.KindUnit, Model: "m1", ID: "db/0"}}})
	if got, _, lost, _ := f.since(l, next); len(got) != 1 || got[0].ID != "db/0" || lost {
		t.Errorf("since(next) after one change = %v, lost %v", got, lost)
	}
	// A reader that fell more than feedSize behind is told it lost some.
	for i := range feedSize + 1 {
		hub.Publish(watcher.ChangeSet{Rev: uint64(1000 + i), Changes: []watcher.Change{{Kind: state.KindUnit, Model: "m1", ID: "x"}}})
	}
	if _, _, lost, _ := f.since(l, next); !lost {
		t.Error("a reader more than feedSize behind was not told it lost changes")
	}
	// A model's own change wakes every listener for the model list.
	hub.Publish(watcher.ChangeSet{Rev: 5000, Changes: []watcher.Change{{Kind: state.KindModel, Model: "m3", ID: "m3", Fields: []string{watcher.FieldCreated}}}})
	if _, _, _, models := f.since(l, 0); !models {
		t.Error("a new model did not flag the model list")
	}
}

// What the feed adds to each published change (it follows every model).
func BenchmarkPublishWithFeed(b *testing.B) {
	for _, withFeed := range []bool{false, true} {
		b.Run(fmt.Sprintf("feed=%v", withFeed), func(b *testing.B) {
			hub := watcher.NewHub()
			if withFeed {
				f := newFeed(hub, time.Now, func(string) {})
				defer f.close()
			}
			cs := watcher.ChangeSet{Changes: []watcher.Change{{Kind: state.KindMachine, Model: "m1", ID: "0", Fields: []string{"status"}}}}
			for i := 0; b.Loop(); i++ {
				cs.Rev = uint64(i)
				hub.Publish(cs)
			}
		})
	}
}
