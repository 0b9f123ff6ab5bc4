package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/state/statetest"
	"github.com/provisiond/provisiond/state/store"
)

// A write whose context is cancelled while it waits for the store's
// commit returns the context's error at once (not after writeTimeout, 30
// s, nor etcd's request timeout), and nothing of it is written: a bulk
// write of two machines' statuses leaves both as they were, on either
// engine. On bbolt the write waits behind another write holding bbolt's
// writer; on etcd its one member is stopped, so no commit can be made,
// and a credential check, which waits for a quorum read first, returns
// the context's error as promptly.
func TestCancelledWriteStopsWaiting(t *testing.T) {
	check := func(t *testing.T, st *state.State, block func() (unblock func()), blockedRead func(context.Context, *state.State) error) {
		model := statetest.DefaultModelUUID
		ids := []string{statetest.AddMachine(t, st, model, "").ID, statetest.AddMachine(t, st, model, "").ID}
		before := make([]state.Machine, len(ids))
		for i, id := range ids {
			m, err := st.Machine(t.Context(), model, id)
			if err != nil {
				t.Fatal(err)
			}
			before[i] = m
		}
		unblock := block()
		args := []state.MachineStatusArg{
			{ID: ids[0], Kind: state.AgentStatus, Status: state.Status{Status: "started"}},
			{ID: ids[1], Kind: state.AgentStatus, Status: state.Status{Status: "started"}},
		}
		var errs []error
		cancelWhileBlocked(t, func(ctx context.Context) error {
			errs = st.SetMachineStatuses(ctx, model, args)
			return nil
		})
		for i, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("item %d: %v; want context.Canceled", i, err)
			}
		}
		if blockedRead != nil {
			if err := cancelWhileBlocked(t, func(ctx context.Context) error { return blockedRead(ctx, st) }); !errors.Is(err, context.Canceled) {
				t.Errorf("the read: %v; want context.Canceled", err)
			}
		}
		unblock()
		for i, id := range ids {
			m, err := st.Machine(t.Context(), model, id)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status.Status != before[i].Status.Status || !m.Status.Since.Equal(before[i].Status.Since) {
				t.Errorf("machine %s: status %+v after the cancelled write; want %+v", id, m.Status, before[i].Status)
			}
		}
		// The store takes writes again.
		if errs := st.SetMachineStatuses(t.Context(), model, args[:1]); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}

	t.Run("bbolt", func(t *testing.T) {
		t.Parallel()
		st := statetest.New(t)
		if st.Store().Info().Engine != "bbolt" {
			st = boltState(t)
		}
		check(t, st, func() func() {
			// Another write holds bbolt's writer: st's queues behind it.
			entered, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				_, err := st.Store().Update(context.Background(), func(store.Txn) error {
					close(entered)
					<-release
					return nil
				})
				held <- err
			}()
			<-entered
			return func() {
				close(release)
				if err := <-held; err != nil {
					t.Errorf("the holding write: %v", err)
				}
			}
		}, nil)
	})

	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		c := etcdtest.New(t)
		st, err := statetest.OpenStore(etcdStore(t, c, newPrefix()), state.Options{})
		st = initialized(t, st, err)
		check(t, st, func() func() {
			c.Stop(0) // no member: no commit
			return func() {
				if err := c.Restart(0); err != nil {
					t.Fatal(err)
				}
				// Reads are the replica's: wait until it follows etcd again.
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				for st.Store().Health(ctx) != nil {
					select {
					case <-ctx.Done():
						t.Fatal("the store did not come back after the member's restart")
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		}, func(ctx context.Context, st *state.State) error {
			// A credential check waits for a quorum read (viewCurrent).
			_, err := st.CheckUserPassword(ctx, state.AdminUser, "not the password")
			return err
		})
	})
}

// cancelWhileBlocked runs f, checks that it is still waiting a moment
// later, cancels its context and returns its error, which must come
// promptly.
func cancelWhileBlocked(t *testing.T, f func(context.Context) error) error {
	t.Helper()
	// promptly bounds the return after the cancel: far below the 10 s of
	// the store's request timeout and the 30 s of writeTimeout, which are
	// what a call ignoring its context would wait for.
	const promptly = 5 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("returned (%v) while the store could not answer", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		t.Logf("returned %v after the cancel", time.Since(cancelled).Round(time.Millisecond))
		return err
	case <-time.After(promptly):
		t.Fatalf("did not return within %v of its context's cancel", promptly)
		return nil
	}
}

// boltState opens an initialized State on a bbolt file of the test's,
// whichever store the suite runs on.
func boltState(t *testing.T) *state.State {
	st, err := statetest.OpenBolt(t.TempDir()+"/state.db", state.Options{})
	return initialized(t, st, err)
}

// initialized returns st, which opening returned with err, initialized
// with statetest's InitArgs and closed when the test ends.
func initialized(t *testing.T, st *state.State, err error) *state.State {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Initialize(t.Context(), statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	return st
}
