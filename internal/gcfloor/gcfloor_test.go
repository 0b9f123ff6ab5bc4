package gcfloor_test

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/gcfloor"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live uint64
		base, want  int
	}{
		{128 * mib, 16 * mib, 100, 700},  // goal 16 × 8 = 128
		{128 * mib, 64 * mib, 100, 100},  // 64 × 2 reaches the floor
		{128 * mib, 100 * mib, 100, 100}, // above it: base
		{128 * mib, 200 * mib, 100, 100}, // live above the floor
		{128 * mib, 48 * mib, 50, 166},   // 48 × 2.66 = 128
		{128 * mib, 0, 100, 1 << 20},     // nothing live: bounded
		{128 * mib, 3 * mib, 100, 4166},  // rounds down: goal just under the floor
		{1 << 62, 1, 100, 1 << 20},       // no overflow
		{128 * mib, 127 * mib, 0, 0},     // GOGC=0 stays 0 only at the floor
		{128 * mib, 64 * mib, 0, 100},    // base 0, under the floor
	} {
		if got := gcfloor.Percent(c.floor, c.live, c.base); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB, %d) = %d, want %d", c.floor/mib, c.live/mib, c.base, got, c.want)
		}
	}
}

func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitPercent collects until the floor's setting satisfies ok (a cleanup
// runs on the runtime's goroutine some time after the collection that
// found its object), within a bound.
func waitPercent(t *testing.T, f *gcfloor.Floor, ok func(int) bool) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		p := f.Percent()
		if ok(p) && gogc() == p {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("GC percent %d (runtime %d) after 30 s of collections", p, gogc())
		}
		runtime.Gosched()
	}
}

// TestFloorFollowsTheLiveHeap: with a small live heap the floor raises
// the GC percent so the goal is the floor; with a live heap above the
// floor it goes back to the base; Stop restores the base and no later
// collection changes it.
func TestFloorFollowsTheLiveHeap(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)

	const floor = 256 << 20
	f := gcfloor.Start(floor)
	if f == nil {
		t.Fatal("Start returned nil with GOGC 100")
	}
	p := waitPercent(t, f, func(p int) bool { return p > 400 })
	t.Logf("small heap: GC percent %d", p)

	// A live heap over the floor: back to the base.
	big := make([][]byte, 0, 320)
	for range 320 {
		big = append(big, make([]byte, 1<<20))
	}
	p = waitPercent(t, f, func(p int) bool { return p == 100 })
	runtime.KeepAlive(big)
	big = nil

	// Dropped again: the floor comes back.
	waitPercent(t, f, func(p int) bool { return p > 400 })

	f.Stop()
	if got := gogc(); got != 100 || f.Percent() != 100 {
		t.Fatalf("after Stop: GC percent %d (floor says %d), want 100", got, f.Percent())
	}
	for range 3 {
		runtime.GC()
	}
	if got := gogc(); got != 100 {
		t.Fatalf("a collection after Stop set GC percent %d", got)
	}
	f.Stop() // twice is fine
	_ = p
}

func TestStartOff(t *testing.T) {
	if gcfloor.Start(0) != nil {
		t.Error("a floor of 0 started")
	}
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	if f := gcfloor.Start(128 << 20); f != nil {
		f.Stop()
		t.Error("a floor started with the collector off")
	}
	var f *gcfloor.Floor
	f.Stop() // nil is a floor that never started
}
