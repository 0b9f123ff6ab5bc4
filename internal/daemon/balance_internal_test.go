package daemon

import (
	"testing"

	"github.com/provisiond/provisiond/state"
)

// TestPlanBalance: the share is over the daemons not draining; a daemon
// sheds and refuses only over its share by more than the margin and while
// one of the others has room, at most balanceRate of its connections (at
// least balanceMinShed) and never past its share or the others' room.
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
		{"the share rounds up", l("a", 8000, false), []state.APIServerLoad{l("b", 0, false), l("c", 1, false)}, true, 40, 2667},
	} {
		p := planBalance("a", tc.own, tc.loads)
		if p.refuse != tc.refuse || p.shed != tc.shed || p.share != tc.share {
			t.Errorf("%s: refuse %t, shed %d, share %d; want %t, %d, %d", tc.name, p.refuse, p.shed, p.share, tc.refuse, tc.shed, tc.share)
		}
	}
}
