package state_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
)

// resume is the Resume a Watch call carries (the facade layer's comes
// from the request's "from-revision").
type resume struct{ from, covered uint64 }

func (r *resume) From() uint64       { return r.from }
func (r *resume) Covered(rev uint64) { r.covered = rev }

// TestResumesDuringWritesReadTheFeed: on etcd, watches resumed one after
// another while commits go on (each resume's snapshot newer than what the
// daemon's history window held) extend the window with the newest
// commits from what the daemon's own feed brought, not from a read of
// the store's history: after the first resume's read, none. Each resumed
// watcher, its initial event and then its events, reports exactly the
// machines added after the revision it resumed from, none twice, none
// missed, with commits made through the daemon serving the resumes (its
// own, applied without the watch) and through another (brought by its
// watch), some of them concurrent (group commits).
func TestResumesDuringWritesReadTheFeed(t *testing.T) {
	sts := etcdStates(t, 2)
	a, b := sts[0], sts[1]
	ctx := t.Context()
	model := statetest.DefaultModelUUID
	add := func(st *state.State) string {
		t.Helper()
		m, err := st.AddMachine(ctx, model, state.MachineParams{})
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	for range 3 {
		add(a)
	}
	if err := b.WaitApplied(ctx, a.Revision()); err != nil {
		t.Fatal(err)
	}
	from := b.Revision()

	var mu sync.Mutex
	var added []string
	record := func(id string) { mu.Lock(); added = append(added, id); mu.Unlock() }
	type resumed struct {
		w interface {
			Next(context.Context) ([]string, error)
			Stop() error
		}
		initial []string
	}
	var ws []resumed
	open := func() {
		t.Helper()
		rs := &resume{from: from}
		w, initial, err := b.WatchModelMachines(context.WithValue(ctx, state.ResumeKey{}, rs), model)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop() })
		ws = append(ws, resumed{w, initial})
	}
	record(add(a))
	if err := b.WaitApplied(ctx, a.Revision()); err != nil {
		t.Fatal(err)
	}
	open() // reads the store's history after from: the window is empty
	before := b.ResumeStats()
	for i := range 6 {
		// A commit through each daemon, then one of two at once, then a
		// resume whose snapshot has them all.
		record(add(a))
		record(add(b))
		var wg sync.WaitGroup
		for _, st := range []*state.State{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); record(add(st)) }()
		}
		wg.Wait()
		if i%2 == 0 {
			if err := b.WaitApplied(ctx, a.Revision()); err != nil {
				t.Fatal(err)
			}
		}
		open()
	}
	got := b.ResumeStats()
	if reads := got.Reads - before.Reads; reads != 0 || got.Recent-before.Recent == 0 {
		t.Errorf("6 resumes during commits: %d reads of the store's history, %d extensions from the feed; want 0 and some", reads, got.Recent-before.Recent)
	}

	// Every watcher reports exactly the machines added after from.
	record(add(a)) // one more, after every resume
	mu.Lock()
	want := slices.Sorted(slices.Values(added))
	mu.Unlock()
	for i, r := range ws {
		seen := map[string]int{}
		for _, id := range r.initial {
			seen[id]++
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for len(seen) < len(want) {
			ids, err := r.w.Next(wctx)
			if err != nil {
				cancel()
				t.Fatalf("watcher %d: %v after %v", i, err, seen)
			}
			for _, id := range ids {
				seen[id]++
			}
		}
		cancel()
		var ids []string
		for id, n := range seen {
			ids = append(ids, id)
			if n > 1 {
				t.Errorf("watcher %d reported machine %s %d times", i, id, n)
			}
		}
		if slices.Sort(ids); !slices.Equal(ids, want) {
			t.Errorf("watcher %d reported %v, want %v", i, ids, want)
		}
	}
}
