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
	"github.com/provisiond/provisiond/state/store/etcdstore"
	"github.com/provisiond/provisiond/watcher"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// openEtcdState opens state on prefix of c through endpoints.
func openEtcdState(t *testing.T, c *etcdtest.Cluster, endpoints []string) *state.State {
	t.Helper()
	st, err := statetest.OpenStore(func(feed store.Feed) (store.Store, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return etcdstore.Open(ctx, etcdstore.Config{
			Endpoints:       endpoints,
			Prefix:          "/reset/",
			Feed:            feed,
			MaxTxnOps:       c.MaxTxnOps(),
			MaxRequestBytes: c.MaxRequestBytes(),
			// Generous: while one member of three is stopped (and
			// restarted) the others may elect a leader, and a loaded box
			// can keep the watch quiet for over a second meanwhile; a
			// StaleAfter of 1 s failed an AddMachine through the other
			// daemon so ("no word from etcd's watch for 1.335s").
			RequestTimeout: 5 * time.Second,
			StaleAfter:     5 * time.Second,
			LeaseTTL:       2 * time.Second,
		})
	}, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestWatchersWokenWhenTheFeedIsCompactedPast: a daemon's state cut off
// from etcd (its only endpoint, one member of three, stops) while another
// adds a machine and history is compacted past what it applied: when the
// member is back, its feed cannot follow, it reloads, and every watcher it
// holds is reset: a notify watcher fires, a strings watcher's Next fails
// with watcher.ErrReset (its client watches again) and a new watch sees
// the machine added while away. A watcher made after the reset is not
// reset.
func TestWatchersWokenWhenTheFeedIsCompactedPast(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	a := openEtcdState(t, c, []string{c.Members()[0].ClientURL})
	if _, err := a.Initialize(t.Context(), statetest.InitArgs()); err != nil {
		t.Fatal(err)
	}
	others := []string{c.Members()[1].ClientURL, c.Members()[2].ClientURL}
	b := openEtcdState(t, c, others)
	model := statetest.DefaultModelUUID
	statetest.AddMachine(t, a, model, "")

	machines, initial, err := a.WatchModelMachines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	defer machines.Stop()
	if len(initial) != 1 {
		t.Fatalf("initial machines %v", initial)
	}
	config, err := a.WatchModelConfig(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	defer config.Stop() // nothing pending: its caller sends the initial event

	c.Stop(0)
	// Two commits while away, and history compacted to the second: what
	// a would resume from (the first) is gone.
	added := statetest.AddMachine(t, b, model, "")
	if err := b.UpdateModelConfig(t.Context(), model, map[string]any{"foo": "bar"}, nil); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: others, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Compact(ctx, int64(b.Revision())); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}

	// The notify watcher fires (its client reads the config again) ...
	if err := config.Next(ctx); err != nil {
		t.Fatalf("notify watcher after the reset: %v", err)
	}
	// ... and the strings watcher fails: it cannot say which ids it missed.
	if ids, err := machines.Next(ctx); !errors.Is(err, watcher.ErrReset) {
		t.Fatalf("strings watcher after the reset: %v %v; want watcher.ErrReset", ids, err)
	}
	// Watching again: the initial event holds the machine added while away,
	// and nothing resets the new watcher.
	again, initial, err := a.WatchModelMachines(t.Context(), model)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	if len(initial) != 2 || initial[1] != added.ID { // 0 and 1
		t.Fatalf("initial machines after watching again: %v; want 0 and %s", initial, added.ID)
	}
	next := statetest.AddMachine(t, b, model, "")
	if ids, err := again.Next(ctx); err != nil || len(ids) != 1 || ids[0] != next.ID {
		t.Fatalf("the new watcher's Next: %v %v; want [%s]", ids, err, next.ID)
	}
}
