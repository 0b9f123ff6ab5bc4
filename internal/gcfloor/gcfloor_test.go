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
		floor, live, roots uint64
		base, want         int
	}{
		{128 * mib, 16 * mib, 0, 100, 700},        // goal 16 × 8 = 128
		{128 * mib, 16 * mib, 16 * mib, 100, 350}, // 16 + 32 × 3.5 = 128: stacks and globals count
		{128 * mib, 64 * mib, 0, 100, 100},        // 64 × 2 reaches the floor
		{128 * mib, 100 * mib, 0, 100, 100},       // above it: base
		{128 * mib, 200 * mib, 0, 100, 100},       // live above the floor
		{128 * mib, 48 * mib, 0, 50, 166},         // 48 × 2.66 = 128
		{128 * mib, 0, 0, 100, 3200},              // before the first collection: 4 MiB × 32 = 128, not 41 GiB
		{128 * mib, 3 * mib, 0, 100, 3200},        // under 4 MiB live the runtime's minimum binds
		{128 * mib, 3 * mib, 2 * mib, 100, 2500},  // ... unless the roots bind first: 3 + 5 × 25 = 128
		{1 << 62, 1, 0, 100, 1 << 20},             // no overflow, bounded
		{128 * mib, 127 * mib, 0, 0, 0},           // GOGC=0 stays 0 only at the floor
		{128 * mib, 64 * mib, 0, 0, 100},          // base 0, under the floor
		{1 * mib, 0, 0, 100, 100},                 // a floor under the runtime's own minimum: base
		{128 * mib, 40 * mib, 30 * mib, 100, 125}, // 40 + 70 × 1.25 = 127.5
		{128 * mib, 100 * mib, 30 * mib, 50, 50},  // 100 + 130 × 0.5 reaches it at base
	} {
		if got := gcfloor.Percent(c.floor, c.live, c.roots, c.base); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB live, %d MiB roots, %d) = %d, want %d", c.floor/mib, c.live/mib, c.roots/mib, c.base, got, c.want)
		}
	}
}

// runtimeGoal is the heap goal the runtime computes at GC percent p for a
// collection that left live bytes and roots (runtime/mgcpacer.go): what
// Percent must bring to the floor.
func runtimeGoal(live, roots uint64, p int) uint64 {
	return max(live+(live+roots)*uint64(p)/100, 4<<20*uint64(p)/100)
}

// TestPercentMeetsTheRuntimesGoal: over live heaps from nothing to past
// the floor, the goal the runtime makes of Percent's answer is the floor
// (within rounding) or, once the base reaches past it, the base's.
func TestPercentMeetsTheRuntimesGoal(t *testing.T) {
	const floor = 128 << 20
	for _, live := range []uint64{0, 1 << 10, 300 << 10, 1 << 20, 3 << 20, 4 << 20, 5 << 20, 20 << 20, 63 << 20, 64 << 20, 200 << 20} {
		for _, roots := range []uint64{0, 512 << 10, 8 << 20} {
			p := gcfloor.Percent(floor, live, roots, 100)
			goal := runtimeGoal(live, roots, p)
			if base := runtimeGoal(live, roots, 100); base >= floor {
				if p != 100 {
					t.Errorf("live %d, roots %d: %d%%, want the base: its goal %d reaches the floor", live, roots, p, base)
				}
				continue
			}
			if goal > floor || goal < floor-floor/100 {
				t.Errorf("live %d, roots %d: %d%% makes a goal of %d MiB, want the floor, %d MiB", live, roots, p, goal>>20, floor>>20)
			}
		}
	}
}

// TestStartSetsTheFloorAsTheGoal: the runtime's own heap goal after Start
// is the floor, not a multiple of it (with a small live heap, as a daemon
// has when it starts, the percent that ignored the runtime's minimum made
// it gigabytes).
func TestStartSetsTheFloorAsTheGoal(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	runtime.GC()
	const floor = 128 << 20
	f := gcfloor.Start(floor)
	defer f.Stop()
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	goal, live := s[0].Value.Uint64(), s[1].Value.Uint64()
	if goal > floor+floor/50 || goal < floor-floor/10 {
		t.Errorf("heap goal %d MiB with %d KiB live after Start(%d MiB), want about the floor", goal>>20, live>>10, floor>>20)
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
