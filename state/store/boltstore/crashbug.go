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

// The crashbug build answers every caller of a batch as if it had been
// committed, then waits, and only then commits: a write acknowledged in
// that window is lost if the process dies in it. SIGKILL does not drop the
// page cache, so a bug that merely skipped fsync would survive a kill; this
// one replies before the commit happens at all, which is what the harness
// can and must catch. Never built into provisiond: only the crash
// harness's planted-bug test builds with this tag.
func init() {
	if os.Getenv("PROVISIOND_CRASHBUG_DELAY") == "off" {
		return
	}
	delay := DefaultPlantedBugDelay
	if d, err := time.ParseDuration(os.Getenv("PROVISIOND_CRASHBUG_DELAY")); err == nil {
		delay = d
	}
	plantedEarlyReply = func(batch []*request, committed []Committed) {
		if committed[0].Rev == 1 {
			// Spare a new file's first write (the daemon's
			// initialisation), which the daemon reads back at once
			// at its first start: with it answered early, that start
			// fails and there is nothing left to test.
			return
		}
		for i, req := range batch {
			req.reply <- result{rev: committed[i].Rev, changes: committed[i].Changes}
			// The committer answers batch[i] again after the commit:
			// give it a fresh channel nobody reads.
			batch[i] = &request{fn: req.fn, reply: make(chan result, 1)}
		}
		time.Sleep(delay)
	}
}
