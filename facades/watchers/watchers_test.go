package watchers_test

import (
	"context"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The watcher facades (NotifyWatcher, StringsWatcher) as an agent sees
// them: Next and Stop, watcher ids, the per-connection limit, and the
// watchers' end with their connection.

func TestModelConfigWatcher(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	c := testkit.LoginController(t, d, creds.DefaultModelUUID)
	var res params.NotifyWatchResult
	if err := c.Call(testkit.Ctx(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &res); err != nil {
		t.Fatal(err)
	}
	if res.NotifyWatcherId != "1" {
		t.Fatalf("first watcher id = %q; want \"1\"", res.NotifyWatcherId)
	}
	w := client.NewNotifyWatcher(c, res.NotifyWatcherId)

	// The first Next waits for a change after the Watch call.
	next := make(chan error, 1)
	go func() { next <- w.Next(testkit.Ctx(t)) }()
	select {
	case err := <-next:
		t.Fatalf("Next returned before any change: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := d.State().UpdateModelConfig(t.Context(), creds.DefaultModelUUID, map[string]any{"logging-config": "<root>=DEBUG"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-next; err != nil {
		t.Fatalf("Next: %v", err)
	}

	// Several changes between two Next calls coalesce into one event.
	for i := 0; i < 5; i++ {
		if err := d.State().UpdateModelConfig(t.Context(), creds.DefaultModelUUID, map[string]any{"n": i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Next(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	// A change to another model does not fire.
	if err := d.State().UpdateModelConfig(t.Context(), creds.ControllerModelUUID, map[string]any{"x": 1}, nil); err != nil {
		t.Fatal(err)
	}
	go func() { next <- w.Next(testkit.Ctx(t)) }()
	select {
	case err := <-next:
		t.Fatalf("Next fired for another model's change: %v", err)
	case <-time.After(100 * time.Millisecond):
	}

	// Stop ends the blocked Next with "stopped"; later calls get "not found".
	if err := w.Stop(testkit.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	testkit.WantErr(t, <-next, "watcher has been stopped", params.CodeStopped)
	testkit.WantErr(t, w.Next(testkit.Ctx(t)), "unknown watcher id", params.CodeNotFound)
	testkit.WantErr(t, w.Stop(testkit.Ctx(t)), "unknown watcher id", params.CodeNotFound)

	// Ids are never reused; a notify id is unknown to StringsWatcher.
	if err := c.Call(testkit.Ctx(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &res); err != nil {
		t.Fatal(err)
	}
	if res.NotifyWatcherId != "2" {
		t.Fatalf("second watcher id = %q; want \"2\"", res.NotifyWatcherId)
	}
	_, err := client.NewStringsWatcher(c, "2").Next(testkit.Ctx(t))
	testkit.WantErr(t, err, "unknown watcher id", params.CodeNotFound)
}

func TestWatchersStoppedOnDisconnect(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	c := testkit.LoginController(t, d, creds.DefaultModelUUID)
	// After the login: a logged-in connection holds a subscription to its
	// entity's credentials, which ends the connection when they change.
	base := d.Hub().Subscriptions()
	for i := 0; i < 5; i++ {
		var res params.NotifyWatchResult
		if err := c.Call(testkit.Ctx(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &res); err != nil {
			t.Fatal(err)
		}
		go func() { _ = client.NewNotifyWatcher(c, res.NotifyWatcherId).Next(context.Background()) }()
	}
	if got := d.Hub().Subscriptions(); got != base+5 {
		t.Fatalf("subscriptions = %d; want %d", got, base+5)
	}
	c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for d.Hub().Subscriptions() != base-1 || d.RPC().Conns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after disconnect: %d subscriptions (want %d), %d connections", d.Hub().Subscriptions(), base-1, d.RPC().Conns())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatcherLimit(t *testing.T) {
	d := testkit.Start(t, func(c *daemon.Config) { c.MaxWatchers = 2 })
	c := testkit.LoginController(t, d, d.Credentials().DefaultModelUUID)
	var res params.NotifyWatchResult
	for i := 0; i < 2; i++ {
		if err := c.Call(testkit.Ctx(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &res); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Call(testkit.Ctx(t), "Provisioner", 11, "", "WatchForModelConfigChanges", nil, &res)
	testkit.WantErr(t, err, "too many watchers on this connection (limit 2)", params.CodeQuotaLimitExceeded)
}
