package rawbolt

import (
	"path/filepath"
	"testing"
	"time"
)

func TestRawCommitBench(t *testing.T) {
	for _, batch := range []bool{false, true} {
		res, err := RawCommitBench(filepath.Join(t.TempDir(), "raw.db"), 4, batch, 128, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if res.Commits == 0 || len(res.Latencies) != res.Commits || res.PerSecond() <= 0 {
			t.Fatalf("batch %v: %+v", batch, res)
		}
	}
	if _, err := RawCommitBench(filepath.Join(t.TempDir(), "raw.db"), 0, false, 1, time.Millisecond); err == nil {
		t.Fatal("no writers: want an error")
	}
}
