package daemon

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

// While a probe is held up behind a commit, not yet past HealthTimeout
// (an hour here), /health says ok at once after an ok: it does not wait
// for the probe, which is still running when the answers come.
func TestHealthAnswersWhileAProbeRuns(t *testing.T) {
	cfg := Default(t.TempDir())
	cfg.Addr = "127.0.0.1:0"
	cfg.HealthTimeout = time.Hour
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(context.Background()) })
	// It polls /health until a probe starts, which takes up to healthReuse
	// (one second) of requests, each on a new connection: no channel of
	// their addresses (one of 100 filled up and blocked the dial, hanging
	// the test until the package's timeout).
	hc := healthClient(d, nil)
	get := func() int {
		t.Helper()
		resp, err := hc.Get("https://" + d.Addr() + "/health")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("/health before: %d", code)
	}
	release, held, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := d.State().Store().Update(context.Background(), func(store.Txn) error {
			close(held)
			<-release
			return nil
		})
		done <- err
	}()
	<-held
	running := func() bool {
		d.health.mu.Lock()
		defer d.health.mu.Unlock()
		return d.health.running != nil
	}
	waitFor(t, "a probe to start behind the held commit", func() bool {
		if code := get(); code != http.StatusOK {
			t.Fatalf("/health while the probe waits: %d", code)
		}
		return running()
	})
	if code := get(); code != http.StatusOK || !running() {
		t.Fatalf("/health %d with a probe running %v; want 200 while it runs", code, running())
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the probe to end", func() bool { return !running() })
}
