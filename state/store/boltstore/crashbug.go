//go:build crashbug

package boltstore

import (
	"os"
	"time"
)

// DefaultPlantedBugDelay is how long the crashbug build waits between
// answering a batch and committing it; $PROVISIOND_CRASHBUG_DELAY (a Go
// duration) overrides it; "off" turns the bug off (the crash harness's
// setup, which is not under test, runs so).
const DefaultPlantedBugDelay = 50 * time.Millisecond

// plantedBug is a deliberately planted durability bug, for the crash
// harness (internal/crashtest) to prove that it catches one. Only a build
// with -tags crashbug has it: such a build answers every caller of a
// batch as if it had been committed, then waits, and only then commits: a
// write acknowledged in that window is lost if the process dies in it.
// SIGKILL does not drop the page cache, so a bug that merely skipped fsync
// would survive a kill; this one replies before the commit happens at
// all, which is what the harness can and must catch. Never built into
// provisiond: only the crash harness's planted-bug test builds with this
// tag.
const plantedBug = true

var plantedDelay = func() time.Duration {
	switch v := os.Getenv("PROVISIOND_CRASHBUG_DELAY"); v {
	case "off":
		return -1
	default:
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		return DefaultPlantedBugDelay
	}
}()

// plantEarlyReply is called after a batch's functions have run and before
// the bbolt commit, with the batch, its results and the first revision it
// is about to commit.
func plantEarlyReply(batch []*request, res []result, firstRev uint64) {
	if plantedDelay < 0 || firstRev == 1 {
		// Spare a new file's first write (the daemon's initialisation),
		// which the daemon reads back at once at its first start: with
		// it answered early, that start fails and there is nothing left
		// to test.
		return
	}
	for i, req := range batch {
		req.reply <- res[i]
		// The committer answers batch[i] again after the commit: give it
		// a fresh channel nobody reads.
		batch[i] = &request{ctx: req.ctx, fn: req.fn, reply: make(chan result, 1)}
	}
	time.Sleep(plantedDelay)
}
