package watcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/provisiond/provisiond/watcher"
)

// TestHubResetReachesEverySubscription: Reset calls every subscription's
// sink once, whatever its filter (any id, one id, one parent, every
// model, fields it would otherwise require), with a change of the
// filter's kind, model, id and parent that IsReset; a cancelled one is
// not called.
func TestHubResetReachesEverySubscription(t *testing.T) {
	h := watcher.NewHub()
	filters := map[string]watcher.Filter{
		"kind":       {Kind: kindMachine, Model: model1},
		"id":         {Kind: kindMachine, Model: model1, ID: "0"},
		"parent":     {Kind: kindMachine, Model: model1, Parent: "0"},
		"all models": {Kind: kindApp, AllModels: true},
		"fields":     {Kind: kindApp, Model: model2, Fields: []string{watcher.FieldLife}},
	}
	got := map[string][]watcher.Change{}
	revs := map[string][]uint64{}
	for name, f := range filters {
		h.Subscribe(f, func(rev uint64, c watcher.Change) {
			got[name] = append(got[name], c)
			revs[name] = append(revs[name], rev)
		})
	}
	cancel := h.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, func(uint64, watcher.Change) {
		t.Error("a cancelled subscription was reset")
	})
	cancel()

	h.Reset(42)
	for name, f := range filters {
		cs := got[name]
		if len(cs) != 1 || revs[name][0] != 42 {
			t.Errorf("%s: got %v at %v; want one reset at 42", name, cs, revs[name])
			continue
		}
		c := cs[0]
		if !c.IsReset() || c.Kind != f.Kind || c.ID != f.ID || c.Parent != f.Parent || (!f.AllModels && c.Model != f.Model) {
			t.Errorf("%s: reset change %+v for filter %+v", name, c, f)
		}
	}
	// An ordinary change is never a reset, whatever its fields hold.
	if (watcher.Change{Kind: kindMachine, Fields: []string{watcher.FieldReset, watcher.FieldLife}}).IsReset() {
		t.Error("a change with more fields than reset IsReset")
	}
}

// TestNotifyReset: a reset triggers a notify watcher, coalescing with
// other events; the watcher goes on.
func TestNotifyReset(t *testing.T) {
	h := watcher.NewHub()
	w := watcher.NewNotify()
	defer w.Stop()
	w.OnStop(h.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1, ID: "0"}, w.Sink()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Reset(7)
	if err := w.Next(ctx); err != nil {
		t.Fatalf("Next after a reset: %v", err)
	}
	h.Publish(watcher.ChangeSet{Rev: 8, Changes: []watcher.Change{{Kind: kindMachine, Model: model1, ID: "0"}}})
	if err := w.Next(ctx); err != nil {
		t.Fatalf("Next after a change following the reset: %v", err)
	}
}

// TestStringsReset: a reset fails a waiting Next and every later one with
// ErrReset (the client watches again); ids added after it are dropped;
// Stop still stops it and cancels its subscriptions.
func TestStringsReset(t *testing.T) {
	h := watcher.NewHub()
	w := watcher.NewStrings()
	w.OnStop(h.Subscribe(watcher.Filter{Kind: kindMachine, Model: model1}, w.Sink()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	w.Add("pending") // before the reset: delivered as usual
	if ids, err := w.Next(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("first Next: %v %v", ids, err)
	}
	waiting := make(chan error, 1)
	w.NextAsync(ctx, func(_ []string, err error) { waiting <- err })
	h.Reset(9)
	select {
	case err := <-waiting:
		if !errors.Is(err, watcher.ErrReset) {
			t.Fatalf("waiting Next after a reset: %v; want ErrReset", err)
		}
	case <-ctx.Done():
		t.Fatal("a waiting Next was not woken by the reset")
	}
	h.Publish(watcher.ChangeSet{Rev: 10, Changes: []watcher.Change{{Kind: kindMachine, Model: model1, ID: "1"}}})
	if ids, err := w.Next(ctx); !errors.Is(err, watcher.ErrReset) {
		t.Fatalf("later Next: %v %v; want ErrReset", ids, err)
	}
	if h.Subscriptions() != 1 {
		t.Fatalf("subscriptions after the reset: %d; want 1 (kept until Stop)", h.Subscriptions())
	}
	w.Stop()
	if h.Subscriptions() != 0 {
		t.Fatalf("subscriptions after Stop: %d", h.Subscriptions())
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("Stop after a reset did not stop the watcher")
	}
}
