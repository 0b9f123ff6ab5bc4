package daemon

import (
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

// TestCompactionFloor: etcd's compactor never compacts into the history's
// retention: by age, to the newest revision it saw longer ago than the
// retention (none yet: nothing); by revisions, to at most now minus
// those kept; both: the older floor.
func TestCompactionFloor(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	samples := []revisionSample{{t0, 100}, {t0.Add(time.Hour), 200}, {t0.Add(2 * time.Hour), 300}}
	tests := []struct {
		name  string
		r     store.Retention
		at    time.Time
		now   uint64
		floor uint64
		kept  int
	}{
		{"nothing old enough", store.Retention{Age: 3 * time.Hour}, t0.Add(2 * time.Hour), 300, 0, 3},
		{"one old enough", store.Retention{Age: 90 * time.Minute}, t0.Add(2 * time.Hour), 300, 100, 3},
		{"two old enough", store.Retention{Age: 30 * time.Minute}, t0.Add(2 * time.Hour), 300, 200, 2},
		{"by revisions", store.Retention{Revisions: 50}, t0.Add(2 * time.Hour), 300, 250, 3},
		{"too few revisions", store.Retention{Revisions: 500}, t0.Add(2 * time.Hour), 300, 0, 3},
		{"both: the older", store.Retention{Age: 30 * time.Minute, Revisions: 150}, t0.Add(2 * time.Hour), 300, 150, 2},
	}
	for _, tt := range tests {
		floor, kept := compactionFloor(append([]revisionSample(nil), samples...), tt.r, tt.now, tt.at)
		if floor != tt.floor || len(kept) != tt.kept {
			t.Errorf("%s: floor %d, %d samples kept; want %d, %d", tt.name, floor, len(kept), tt.floor, tt.kept)
		}
	}
}
