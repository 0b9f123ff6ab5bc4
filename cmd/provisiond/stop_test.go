package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/state/store"
)

// TestStopWithinOverrun: a stop that has not ended by its limit is left
// to the process's exit: stopWithin returns errStopOverran and logs the
// goroutines' stacks, grouped. (A budget already spent and no grace: no
// daemon stops in no time.) One that ends in time returns Shutdown's own
// answer.
func TestStopWithinOverrun(t *testing.T) {
	start := func() *daemon.Daemon {
		cfg := daemon.Default(filepath.Join(t.TempDir(), "data"))
		cfg.Addr = "127.0.0.1:0"
		d, err := daemon.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Shutdown returning first would need the test's goroutine parked
	// for the whole stop between two statements: on a loaded box, try
	// again.
	overran := false
	for attempt := 0; attempt < 5 && !overran; attempt++ {
		d := start()
		var logs bytes.Buffer
		spent, cancelSpent := context.WithDeadline(ctx, time.Now())
		err := stopWithin(spent, d, 0, slog.New(slog.NewTextHandler(&logs, nil)))
		cancelSpent()
		switch {
		case err == nil:
			continue // Shutdown won the race
		case !errors.Is(err, errStopOverran):
			t.Fatalf("stopWithin with no time: %v, want errStopOverran", err)
		}
		overran = true
		for _, want := range []string{"did not end within its budget", "goroutine profile: total"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the log lacks %q:\n%.2000s", want, logs.String())
			}
		}
		// The abandoned stop ends on its own: wait for it before the
		// data dir goes.
		for !errors.Is(d.State().Store().Health(ctx), store.ErrClosed) {
			if ctx.Err() != nil {
				t.Fatal("the abandoned stop did not close the store")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !overran {
		t.Fatal("every Shutdown ended before a timer of 0")
	}

	if err := stopWithin(ctx, start(), time.Minute, slog.New(slog.DiscardHandler)); err != nil {
		t.Errorf("stopWithin with time to spare: %v", err)
	}
}
