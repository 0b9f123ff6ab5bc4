package daemon

import (
	"testing"

	"github.com/provisiond/provisiond/state"
)

// TestPlanBalance: the share is over the daemons not draining; only while
// another is under its share by more than the margin (room) does a daemon
// at its share or over it refuse, and one over it by more than the margin
// shed, at most balanceRate of its connections (at least balanceMinShed)
// and never past its share or the others' room.
func TestPlanBalance(t *testing.T) {
	l := func(server string, conns int, draining bool) state.APIServerLoad {
		return state.APIServerLoad{Server: server, Conns: conns, Draining: draining}
	}
	for _, tc := range []struct {
		name   string
		own    state.APIServerLoad
		loads  []state.APIServerLoad
		refuse bool
		shed   int
		share  int
	}{
		{"alone", l("a", 5000, false), []state.APIServerLoad{l("a", 10, false)}, false, 0, 0},
		{"after a restart: the empty daemon takes the others' excess", l("a", 15000, false),
			[]state.APIServerLoad{l("a", 14000, false), l("b", 15000, false), l("c", 0, false)}, true, 75, 10000},
		{"within the margin", l("a", 1099, false), []state.APIServerLoad{l("b", 1000, false), l("c", 900, false)}, false, 0, 1000},
		{"over the margin: the floor", l("a", 1200, false), []state.APIServerLoad{l("b", 1000, false), l("c", 800, false)}, true, balanceMinShed, 1000},
		{"over, but nobody has room", l("a", 140, false), []state.APIServerLoad{l("b", 140, false), l("c", 20, true)}, false, 0, 140},
		{"a draining daemon is neither share nor room", l("a", 3000, false), []state.APIServerLoad{l("b", 3000, false), l("c", 10, true)}, false, 0, 3000},
		{"draining itself", l("a", 3000, true), []state.APIServerLoad{l("b", 0, false)}, false, 0, 0},
		{"a few agents never move", l("a", 60, false), []state.APIServerLoad{l("b", 0, false)}, false, 0, 30},
		{"never past the room", l("a", 100000, false), []state.APIServerLoad{l("b", 99990, false)}, false, 0, 99995},
		{"at its share: refuses, sheds nothing", l("a", 950, false), []state.APIServerLoad{l("b", 1050, false), l("c", 700, false)}, true, 0, 900},
		{"under its share: admits", l("a", 890, false), []state.APIServerLoad{l("b", 1110, false), l("c", 700, false)}, false, 0, 900},
		{"the share rounds up", l("a", 8000, false), []state.APIServerLoad{l("b", 0, false), l("c", 1, false)}, true, 40, 2667},
	} {
		p := planBalance("a", tc.own, tc.loads)
		if p.refuse != tc.refuse || p.shed != tc.shed || p.share != tc.share {
			t.Errorf("%s: refuse %t, shed %d, share %d; want %t, %d, %d", tc.name, p.refuse, p.shed, p.share, tc.refuse, tc.shed, tc.share)
		}
	}
}

// TestPlanBalanceAll: the total the steadiness is judged by counts the
// draining daemons' connections too, so a drain moving agents to the
// others keeps it.
func TestPlanBalanceAll(t *testing.T) {
	own := state.APIServerLoad{Server: "a", Conns: 5000}
	for _, drained := range []int{0, 2000, 4000} {
		loads := []state.APIServerLoad{{Server: "b", Conns: 5000 + 4000 - drained, Draining: true}, {Server: "c", Conns: 5000 + drained}}
		if p := planBalance("a", own, loads); p.all != 19000 || p.total != 10000+drained {
			t.Errorf("%d moved: all %d, total %d; want 19000, %d", drained, p.all, p.total, 10000+drained)
		}
	}
}

// TestSteady: the daemons act only once the total has held within 2%
// (at least 32 connections) for five intervals.
func TestSteady(t *testing.T) {
	for _, tc := range []struct {
		totals []int
		want   bool
	}{
		{[]int{1000, 1000, 1000, 1000}, false}, // not yet five intervals
		{[]int{1000, 1000, 1000, 1000, 1000}, true},
		{[]int{99000, 99500, 100000, 100100, 100000}, true}, // within 2,000
		{[]int{60000, 70000, 80000, 90000, 100000}, false},  // connecting
		{[]int{10, 30, 40, 41, 42}, true},                   // within 32
		{[]int{0, 30, 40, 60, 80}, false},
	} {
		if got := steady(tc.totals); got != tc.want {
			t.Errorf("steady(%v) = %t, want %t", tc.totals, got, tc.want)
		}
	}
}
