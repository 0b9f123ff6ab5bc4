package daemon_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state/store/boltstore"
)

// The database file removed under a running daemon: /health fails at once
// with the reason, every write is refused (code try again: agents retry,
// and reach the daemon that replaces this one), Failed is closed for the
// daemon's owner (serve stops and exits 3: TestDatabaseTakenFromUnderTheDaemon
// in cmd/provisiond runs the built binary), and what the daemon held is in
// provisiond.db.rescued.
func TestStoreFailureFailsHealthAndWrites(t *testing.T) {
	d := start(t, nil)
	admin := client.NewModelAdmin(loginAdmin(t, d, ""))
	ctx := ctxT(t)
	if _, err := admin.SetModelConfig(ctx, params.SetModelConfigArgs{Config: map[string]any{"k": "before"}}); err != nil {
		t.Fatal(err)
	}
	if code, body := httpGet(t, d, "/health"); code != http.StatusOK {
		t.Fatalf("/health before: %d %s", code, body)
	}
	db := d.State().Store().Info().Location
	if filepath.Base(db) != daemon.DBFile {
		t.Fatalf("the store is at %s", db)
	}
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	// The health probe's result is reused for a second: poll, bounded.
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet(t, d, "/health")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "was removed while the daemon held it") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/health after the file was removed: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-d.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("Failed not closed")
	}
	if err := d.Failure(); err == nil || !strings.Contains(err.Error(), boltstore.RescuePath(db)) {
		t.Errorf("Failure() = %v; want it to name the copy", err)
	}
	_, err := admin.SetModelConfig(ctx, params.SetModelConfigArgs{Config: map[string]any{"k": "after"}})
	if !isCode(err, params.CodeTryAgain) {
		t.Errorf("a write after the failure: %v; want code try again", err)
	}
	if _, err := os.Stat(boltstore.RescuePath(db)); err != nil {
		t.Errorf("no copy: %v", err)
	}
}
