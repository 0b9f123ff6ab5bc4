package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/provisiond/provisiond/state"
)

// /health says "ok" only while the store commits (a check that did not
// write said ok while every write hung). Each check runs a write transaction that
// changes nothing (state.ProbeWrite), queued behind the commits in progress
// like any write; if it has not come back within Config.HealthTimeout the
// daemon is unhealthy (503 "store cannot commit..."). At most one probe
// runs at a time and a result is reused for a second, so polling /health
// costs the writer at most one empty transaction a second. While a probe
// runs, not yet past the timeout, after one that said ok, /health says ok
// at once rather than wait for it: a hang is reported as soon as the probe
// has overrun, as before, and a request no longer waits behind a commit's
// fsync when nothing is wrong. A full disk is
// not reported here: commits fail at once and writers get the error,
// while the daemon goes on serving reads. etcd out of space is: a write
// refused for it (state.NoSpace) is the answer at once, for a second,
// then the probes' (etcd's NOSPACE alarm stays raised until disarmed). The store's own Health is asked
// too: on etcd it says whether etcd answers with a quorum (an empty write
// never reaches etcd), so a daemon cut off from etcd is unhealthy.

// DefaultHealthTimeout is how long /health waits for the store's writer.
const DefaultHealthTimeout = 5 * time.Second

const healthReuse = time.Second

type healthProbe struct {
	d *Daemon

	mu      sync.Mutex // guards the fields below
	running chan struct{}
	started time.Time
	err     error
	at      time.Time // of the last result
	noted   time.Time // of the last write refused for want of space taken as a result
}

// check returns nil while the store commits.
func (h *healthProbe) check() error {
	timeout := h.d.cfg.HealthTimeout
	h.mu.Lock()
	if at, err := h.d.state.NoSpace(); err != nil && at.After(h.noted) {
		// A write was refused for want of space (etcd's NOSPACE alarm)
		// since the last result: that is the answer now, not an ok
		// from before it (a probe's empty write never reaches etcd);
		// a probe after it asks etcd's alarms again.
		h.noted = at
		h.err, h.at = fmt.Errorf("store out of space: %w", err), at
	}
	if h.running == nil && time.Since(h.at) < healthReuse && !h.at.IsZero() {
		err := h.err
		h.mu.Unlock()
		return err
	}
	if h.running == nil {
		done := make(chan struct{})
		started := time.Now()
		h.running, h.started = done, started
		go func() {
			err := h.d.state.ProbeWrite(context.Background())
			if err == nil {
				err = h.d.storeHealth(timeout)
			}
			h.mu.Lock()
			if !h.noted.After(started) { // else a refusal since it started stands
				h.err, h.at = err, time.Now()
			}
			h.running = nil
			h.mu.Unlock()
			close(done)
		}()
	}
	running, started := h.running, h.started
	if h.err == nil && !h.at.IsZero() && time.Since(started) < timeout {
		// The last probe said ok and this one has not overrun yet: what
		// it will say is not known before the timeout, and a hang is
		// reported as soon as it has overrun either way. Answering now
		// keeps /health from waiting behind a commit's fsync, or behind
		// a storm's CPU, when nothing is wrong (in a storm of 10,000
		// agents the slowest /health's answer took 2.28 s, most of it
		// waiting for a fresh probe).
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	wait := timeout - time.Since(started)
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-running:
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.err
		case <-t.C:
		}
	}
	return fmt.Errorf("store cannot commit: a write has waited %v for the writer (limit %v)",
		time.Since(started).Round(time.Millisecond), timeout)
}

func (d *Daemon) handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	if err := d.health.check(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// storeHealth asks the store whether it can commit (etcd: reachable, with
// a quorum), within timeout.
func (d *Daemon) storeHealth(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := d.state.Store().Health(ctx); err != nil {
		if errors.Is(err, state.ErrStoreNoSpace) {
			return fmt.Errorf("store out of space: %w", err)
		}
		return fmt.Errorf("store unavailable: %w", err)
	}
	return nil
}
