package singular_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/singular"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// The runner against a real bbolt store's elections (on etcd the daemons'
// handover is tested end to end: internal/daemon's
// TestMachineUndertakerHandsOverOnEtcd).

func openStore(t *testing.T) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

const wait = 20 * time.Second

func within(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A runner leads at once on bbolt and runs its workers; a worker that
// returns is started again; Stop ends the workers' context and waits for
// them.
func TestRunnerRunsWorkersWhileLeading(t *testing.T) {
	s := openStore(t)
	var runs atomic.Int32
	twice := make(chan struct{})
	ended := make(chan struct{})
	r := singular.Start(singular.Config{Elector: s, Election: "test", Workers: []singular.Worker{{
		Name: "flaky",
		Run: func(ctx context.Context) error {
			if runs.Add(1) == 1 {
				return errors.New("first run fails")
			}
			close(twice)
			<-ctx.Done()
			close(ended)
			return nil
		},
	}}})
	within(t, "the worker's second run", twice)
	if !r.Leading() {
		t.Error("a runner running its workers is not leading")
	}
	if !r.Stop(wait) {
		t.Fatal("Stop did not return")
	}
	within(t, "the worker's end", ended)
	if r.Leading() {
		t.Error("a stopped runner is leading")
	}
}

// Two runners of one election take turns: the second leads only once the
// first has stopped (its workers returned), and then runs its own.
func TestRunnersTakeTurns(t *testing.T) {
	s := openStore(t)
	var running atomic.Int32
	both := atomic.Bool{}
	started := []chan struct{}{make(chan struct{}), make(chan struct{})}
	start := func(i int) *singular.Runner {
		return singular.Start(singular.Config{Elector: s, Election: "turns", Workers: []singular.Worker{{
			Name: "w",
			Run: func(ctx context.Context) error {
				if running.Add(1) > 1 {
					both.Store(true)
				}
				close(started[i])
				<-ctx.Done()
				running.Add(-1)
				return nil
			},
		}}})
	}
	a := start(0)
	within(t, "the first runner's worker", started[0])
	b := start(1)
	select {
	case <-started[1]:
		t.Fatal("the second runner ran its worker while the first led")
	case <-time.After(100 * time.Millisecond):
	}
	if b.Leading() {
		t.Fatal("two runners lead")
	}
	a.Stop(wait)
	within(t, "the second runner's worker after the first stopped", started[1])
	b.Stop(wait)
	if both.Load() {
		t.Error("two workers of one election ran at once")
	}
}

// When the store closes, the leadership ends: the workers' context is
// done and the runner stops campaigning (store closed).
func TestRunnerStopsWhenTheStoreCloses(t *testing.T) {
	s := openStore(t)
	ran, ended := make(chan struct{}), make(chan struct{})
	r := singular.Start(singular.Config{Elector: s, Election: "close", Workers: []singular.Worker{{
		Name: "w",
		Run: func(ctx context.Context) error {
			close(ran)
			<-ctx.Done()
			close(ended)
			return nil
		},
	}}})
	within(t, "the worker", ran)
	s.Close()
	within(t, "the worker's end once the store closed", ended)
	if !r.Stop(wait) {
		t.Fatal("Stop did not return after the store closed")
	}
}
