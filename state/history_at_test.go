package state_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// pastModel is what TestViewAt compares: a model's records as state
// reads them.
type pastModel struct {
	Machines []state.Machine
	Units    []state.Unit
	Apps     []state.Application
}

func readPast(ctx context.Context, st *state.State, model string) (pastModel, error) {
	var p pastModel
	var err error
	if p.Machines, err = st.Machines(ctx, model); err != nil {
		return p, err
	}
	if p.Units, err = st.Units(ctx, model); err != nil {
		return p, err
	}
	p.Apps, err = st.Applications(ctx, model)
	return p, err
}

// TestViewAt: a model changed in known steps (machines added, provisioned,
// their statuses set, one removed; an application and its units added)
// reads at each step's revision, and at each step's time, as it was read
// live at that step; a point in the future is not valid.
func TestViewAt(t *testing.T) {
	st := statetest.New(t)
	ctx := t.Context()
	model := statetest.DefaultModelUUID
	type step struct {
		rev  uint64
		at   time.Time
		live pastModel
	}
	var steps []step
	record := func() {
		t.Helper()
		live, err := readPast(ctx, st, model)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, step{rev: st.Revision(), at: time.Now(), live: live})
	}
	record()
	m0 := statetest.AddMachine(t, st, model, "")
	record()
	m1 := statetest.AddMachine(t, st, model, "n1")
	record()
	if err := st.SetMachineStatus(ctx, model, m0.ID, state.InstanceStatus, state.Status{Status: "running", Message: "up"}); err != nil {
		t.Fatal(err)
	}
	record()
	if _, err := st.AddApplication(ctx, model, state.ApplicationParams{Name: "mysql", CharmURL: "ch:mysql"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddUnit(ctx, model, "mysql", m1.ID, ""); err != nil {
		t.Fatal(err)
	}
	record()
	if err := st.SetMachineStatus(ctx, model, m0.ID, state.InstanceStatus, state.Status{Status: "error", Message: "gone"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DestroyMachines(ctx, model, []string{m0.ID}, false); err != nil {
		t.Fatal(err)
	}
	record()
	if err := st.EnsureMachineDead(ctx, model, m0.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RemoveMachine(ctx, model, m0.ID); err != nil {
		t.Fatal(err)
	}
	record()

	for i, s := range steps {
		for _, byTime := range []bool{false, true} {
			rev, at := s.rev, time.Time{}
			if byTime {
				rev, at = 0, s.at
			}
			var got pastModel
			err := st.ViewAt(ctx, rev, at, func(past *state.State, p state.PastPoint) error {
				if !byTime && p.Rev != s.rev || byTime && p.Rev > s.rev {
					return fmt.Errorf("point %+v, want revision %d", p, s.rev)
				}
				var err error
				got, err = readPast(ctx, past, model)
				return err
			})
			if err != nil {
				t.Fatalf("step %d (revision %d, by time %v): %v", i, s.rev, byTime, err)
			}
			if !reflect.DeepEqual(got, s.live) {
				t.Errorf("step %d (revision %d, by time %v):\n got %+v\nwant %+v", i, s.rev, byTime, got, s.live)
			}
		}
	}

	fn := func(*state.State, state.PastPoint) error { return nil }
	if err := st.ViewAt(ctx, st.Revision()+10, time.Time{}, fn); !errors.Is(err, errors.NotValid) || !strings.Contains(err.Error(), "in the future") {
		t.Errorf("a revision in the future: %v", err)
	}
	if err := st.ViewAt(ctx, 0, time.Now().Add(time.Hour), fn); !errors.Is(err, errors.NotValid) || !strings.Contains(err.Error(), "in the future") {
		t.Errorf("a time in the future: %v", err)
	}
	if err := st.ViewAt(ctx, 0, time.Now().Add(-24*time.Hour), fn); !errors.Is(err, errors.NotFound) || !strings.Contains(err.Error(), "the oldest point kept is revision") {
		t.Errorf("a time before the history: %v", err)
	}
}

// TestViewAtConcurrentWrites: while a writer commits status after status
// and readers rebuild past points, each point reads exactly the status
// last written at or before it: no commit between the view and the
// history lost or undone twice.
func TestViewAtConcurrentWrites(t *testing.T) {
	st := statetest.New(t)
	ctx := t.Context()
	model := statetest.DefaultModelUUID
	const machines, writes = 4, 60
	var ids []string
	for range machines {
		ids = append(ids, statetest.AddMachine(t, st, model, "").ID)
	}
	// points[i] is the revision of write i; write i sets machine i%machines's
	// message to i.
	points := make([]uint64, writes)
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() {
		for i := range writes {
			err := st.SetMachineStatus(ctx, model, ids[i%machines], state.InstanceStatus, state.Status{Status: "running", Message: fmt.Sprint(i)})
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			points[i] = st.Revision()
			mu.Unlock()
		}
		done <- nil
	}()
	check := func(i int) error {
		mu.Lock()
		rev := points[i]
		mu.Unlock()
		return st.ViewAt(ctx, rev, time.Time{}, func(past *state.State, _ state.PastPoint) error {
			ms, err := past.Machines(ctx, model)
			if err != nil {
				return err
			}
			for k, m := range ms {
				want := ""
				for j := i; j >= 0; j-- {
					if j%machines == k {
						want = fmt.Sprint(j)
						break
					}
				}
				if m.InstanceStatus.Message != want {
					return fmt.Errorf("at write %d (revision %d): machine %s says %q, want %q", i, rev, m.ID, m.InstanceStatus.Message, want)
				}
			}
			return nil
		})
	}
	// Two readers rebuild the points written so far, in turn, until the
	// writer is done.
	written := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for n < writes && points[n] != 0 {
			n++
		}
		return n
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := r; ; k++ {
				n := written()
				if n == writes {
					return
				}
				if n == 0 {
					runtime.Gosched()
					continue
				}
				if err := check((k * 7) % n); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// And afterwards, points throughout once more.
	for i := 0; i < writes; i += 5 {
		if err := check(i); err != nil {
			t.Fatal(err)
		}
	}
}

// TestViewAtPruned: a point older than the history kept fails with the
// oldest point kept; the oldest itself still reads (bbolt, whose pruning
// a test can drive).
func TestViewAtPruned(t *testing.T) {
	if statetest.Store != nil {
		t.Skip("prunes a bbolt store")
	}
	var bs *boltstore.Store
	st, err := statetest.OpenStore(func(feed store.Feed) (store.Store, error) {
		var err error
		bs, err = boltstore.Open(filepath.Join(t.TempDir(), "state.db"), boltstore.Options{Feed: feed, InitialMmapSize: boltstore.MmapSize})
		return bs, err
	}, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := t.Context()
	if _, err := st.Initialize(ctx, statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	model := statetest.DefaultModelUUID
	m := statetest.AddMachine(t, st, model, "")
	for i := range 10 {
		if err := st.SetMachineStatus(ctx, model, m.ID, state.InstanceStatus, state.Status{Status: "running", Message: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bs.PruneHistory(ctx, store.Retention{Revisions: 4}, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	stats, err := bs.HistoryStats(ctx)
	if err != nil || stats.Oldest == 0 {
		t.Fatalf("HistoryStats = %+v, %v", stats, err)
	}
	fn := func(*state.State, state.PastPoint) error { return nil }
	err = st.ViewAt(ctx, stats.Oldest-1, time.Time{}, fn)
	want := fmt.Sprintf("revision %d is older than the history kept: the oldest point kept is revision %d (", stats.Oldest-1, stats.Oldest)
	if !errors.Is(err, errors.NotFound) || !strings.Contains(fmt.Sprint(err), want) {
		t.Errorf("a pruned point: %v, want %q", err, want)
	}
	err = st.ViewAt(ctx, stats.Oldest, time.Time{}, func(past *state.State, p state.PastPoint) error {
		got, err := past.Machine(ctx, model, m.ID)
		if err != nil {
			return err
		}
		if got.InstanceStatus.Message != "6" || p.Time.IsZero() {
			return fmt.Errorf("the oldest point %+v: status %+v", p, got.InstanceStatus)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
