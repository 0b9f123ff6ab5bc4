// Package failpoint is named points in the stores' commit paths where a
// test can make the daemon crash, stall or misbehave exactly between two
// steps, in the spirit of etcd's gofail. The points exist only in a build
// with -tags failpoints (failpoint_on.go); in every other build Enabled is
// the constant false and each call site, written
//
//	if failpoint.Enabled {
//		... failpoint.Eval("store/commit") ...
//	}
//
// is dead code the compiler removes: the points cost nothing.
//
// A daemon built with the tag reads $PROVISIOND_FAILPOINTS at start:
// "POINT=[P%]ACTION" items separated by ";", for example
// "store/reply=5%crash;feed/apply=delay(20ms)". P% makes the action happen
// at that share of the point's passes (default every one). Actions:
//
//	crash        SIGKILL the process at the point
//	delay(DUR)   sleep DUR (a Go duration) at the point
//	skip         the call site skips its step (a planted bug)
//	repeat       the call site does its step again (a planted bug)
//	early        the call site answers before it commits (a planted bug)
//
// The points (Points lists them): store/commit (a write about to be sent
// to etcd; early: answered first, committed 50ms later), store/reply (a
// write committed, not yet answered), feed/apply (a change set about to
// reach the watchers; skip: never reaches them; repeat: reaches them
// again with the next one), replica/catch-up (the replica about to watch
// etcd again from where it was, after its watch broke; skip: the watch
// starts one revision late, which the replica then never applies).
package failpoint

// Action is what the call site is to do beside its normal step.
type Action int

const (
	None   Action = iota // carry on (also after a crash's or delay's turn)
	Skip                 // skip the step
	Repeat               // do the step again
	Early                // answer before committing
)

// EnvVar names the failpoints a daemon built with the tag runs with.
const EnvVar = "PROVISIOND_FAILPOINTS"

// Points are the failpoints there are.
var Points = []string{"store/commit", "store/reply", "feed/apply", "replica/catch-up"}
