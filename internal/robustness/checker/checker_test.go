package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// w and r make operations of client c on register "machine/<e>#status"
// (entity "machine/<e>") over [call, ret].
func w(c int, e, v string, call, ret int64, out Outcome) Op {
	return Op{Client: c, Register: "machine/" + e + "#status", Entity: "machine/" + e, Write: true, Value: v, Call: call, Return: ret, Outcome: out}
}

func r(c int, e, v string, call, ret int64) Op {
	return Op{Client: c, Register: "machine/" + e + "#status", Entity: "machine/" + e, Value: v, Call: call, Return: ret, Outcome: OK}
}

// absent marks a read as finding nothing.
func absent(op Op) Op { op.Absent = true; return op }

// on sets the daemon an operation went through.
func on(daemon string, op Op) Op { op.Daemon = daemon; return op }

// life is an acknowledged write of machine id's life (register
// machine/ID#life), config one of the default model's config.
func life(id, v string, call, ret int64) Op {
	return Op{Register: "machine/" + id + "#life", Entity: "machine/" + id, Write: true, Value: v, Call: call, Return: ret, Outcome: OK}
}

func config(v string, call, ret int64) Op {
	return Op{Register: "config/k", Entity: "model/u", Write: true, Value: v, Call: call, Return: ret, Outcome: OK}
}

// final marks a read as one of the settled run's last round.
func final(op Op) Op { op.Final = true; return op }

// kind is a stream of a watcher of kind on scope.
func kind(k, scope string, ds ...Delivery) Stream {
	st := stream(ds...)
	st.Kind, st.Scope = k, scope
	return st
}

func d(next, recv int64, entities ...string) Delivery {
	return Delivery{Next: next, Recv: recv, Entities: entities}
}

// modelLife is an acknowledged write of model uuid's life.
func modelLife(uuid, v string, call, ret int64) Op {
	return Op{Register: "modelrec/" + uuid + "#life", Entity: "model/" + uuid, Model: ModelsModel, Write: true, Value: v, Call: call, Return: ret, Outcome: OK}
}

// resumed is a stream of a model watcher resumed once.
func resumed(ds ...Delivery) Stream {
	st := kind(KindModelResumed, "", ds...)
	st.Resumes = 1
	return st
}

func stream(ds ...Delivery) Stream {
	return Stream{Watcher: "w", Daemon: "a", Start: 0, Started: 1, Deliveries: ds, End: 1000, EndReason: EndStopped}
}

func kinds(as []Anomaly) string {
	var ks []string
	for _, a := range as {
		ks = append(ks, a.Kind)
	}
	return strings.Join(ks, ",")
}

func TestCheckerHistories(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    History
		want string // the anomaly kinds, in order ("" for none)
	}{{
		name: "good: writes, reads, concurrent read, one delivery per write",
		h: History{Ops: []Op{
			w(0, "0", "a", 5, 10, OK), r(1, "0", "a", 12, 14), w(0, "0", "b", 20, 30, OK),
			r(1, "0", "a", 21, 25), // concurrent with b: may see a
			r(1, "0", "b", 31, 35), w(0, "1", "x", 40, 45, OK),
		}, Streams: []Stream{stream(d(1, 11, "machine/0"), d(11, 28, "machine/0"), d(28, 46, "machine/1"))}},
	}, {
		name: "good: two writes coalesced into one delivery, an unwatched entity",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 11, 15, OK)},
			Streams: []Stream{stream(d(1, 20, "machine/0", "model/x"))}},
	}, {
		name: "good: a write in doubt lands, later reads agree",
		h: History{Ops: []Op{
			w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 20, 25, InDoubt), r(1, "0", "b", 40, 45), r(1, "0", "b", 50, 55),
		}, Streams: []Stream{stream(d(1, 11, "machine/0"), d(11, 60, "machine/0"))}},
	}, {
		name: "good: a write in doubt that did not land, a failed write",
		h: History{Ops: []Op{
			w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 20, 25, InDoubt), w(0, "0", "c", 26, 27, Failed), r(1, "0", "a", 40, 45),
		}},
	}, {
		name: "good: a reset after a compaction; writes while no stream ran",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 50, 55, OK)},
			Streams: []Stream{{Watcher: "w", Daemon: "a", Start: 0, Started: 1, End: 40, EndReason: EndReset}},
			Faults:  []Fault{{Kind: FaultCompact, At: 30}}},
	}, {
		name: "lost write: acknowledged, then read as never written",
		h:    History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 20, 30, OK), r(1, "0", "a", 40, 45)}},
		want: NotLinearizable,
	}, {
		name: "stale read: a read after a read that saw the newer value",
		h: History{Ops: []Op{
			w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 20, 100, InDoubt), r(1, "0", "b", 30, 35), r(2, "0", "a", 40, 45),
		}},
		want: NotLinearizable,
	}, {
		name: "good: a read through another daemon misses a write for a moment",
		h: History{Ops: []Op{
			on("d1", w(0, "0", "a", 5, 10, OK)), on("d1", w(0, "0", "b", 20, 25, OK)), on("d2", r(1, "0", "a", 30, 35)),
			on("d2", r(1, "0", "b", 40, 45)),
		}},
	}, {
		name: "stale read: a daemon's reads go back",
		h: History{Ops: []Op{
			on("d1", w(0, "0", "a", 5, 10, OK)), on("d1", w(0, "0", "b", 20, 25, OK)), on("d2", r(1, "0", "b", 30, 35)),
			on("d2", r(1, "0", "a", 40, 45)),
		}},
		want: NotLinearizable,
	}, {
		name: "stale read: a daemon misses a write that returned before one it acknowledged",
		h: History{Ops: []Op{
			on("d1", w(0, "0", "a", 0, 2, OK)), on("d1", w(0, "0", "b", 5, 10, OK)), on("d2", w(2, "1", "x", 12, 15, OK)),
			on("d2", r(1, "0", "a", 20, 25)),
		}},
		want: NotLinearizable,
	}, {
		name: "good: a daemon finds nothing before it has seen an addition",
		h: History{Ops: []Op{
			on("d1", w(0, "0", "alive", 5, 10, OK)), on("d2", absent(r(1, "0", "removed", 12, 15))),
			on("d2", r(1, "0", "alive", 20, 25)), on("d1", w(0, "0", "removed", 30, 35, OK)),
			on("d2", absent(r(1, "0", "removed", 40, 45))),
		}},
	}, {
		name: "stale read: a daemon finds nothing after it read the addition",
		h: History{Ops: []Op{
			on("d1", w(0, "0", "alive", 5, 10, OK)), on("d2", r(1, "0", "alive", 20, 25)),
			on("d2", absent(r(1, "0", "removed", 30, 35))), on("d1", w(0, "0", "removed", 40, 45, OK)),
		}},
		want: NotLinearizable,
	}, {
		name: "duplicate delivery: one write delivered twice",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK)},
			Streams: []Stream{stream(d(1, 12, "machine/0"), d(12, 30, "machine/0"))}},
		want: UnjustifiedDeliv,
	}, {
		name: "invented delivery: an entity delivered before any write of it",
		h: History{Ops: []Op{w(0, "0", "a", 50, 60, OK)},
			Streams: []Stream{stream(d(1, 20, "machine/0"), d(20, 70, "machine/0"))}},
		want: UnjustifiedDeliv,
	}, {
		name: "reordered delivery: a later write delivered before an earlier one",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(0, "1", "b", 15, 20, OK)},
			Streams: []Stream{stream(d(1, 25, "machine/1"), d(25, 30, "machine/0"))}},
		want: Reordered,
	}, {
		name: "lost delivery: a Next past the write returns without it",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(1, "1", "b", 20, 25, OK)},
			Streams: []Stream{stream(d(12, 40, "machine/1"))}},
		want: LostDelivery,
	}, {
		name: "reset without a compaction",
		h: History{Streams: []Stream{{Watcher: "w", Daemon: "a", Start: 0, Started: 1, End: 40, EndReason: EndReset}},
			Faults: []Fault{{Kind: FaultCompact, At: 50}, {Kind: "kill-daemon", At: 20}}},
		want: UnexpectedReset,
	}, {
		name: "good: a machines watcher is delivered additions and deaths, not status writes or removals",
		h: History{Ops: []Op{
			life("3", "alive", 5, 10), w(0, "3", "s1", 12, 14, OK), life("3", "dead", 20, 25), life("3", "removed", 30, 35),
			life("0/lxd/1", "alive", 40, 45),
		}, Streams: []Stream{kind(KindMachines, "", d(1, 11, "machine/3"), d(11, 26, "machine/3"))}},
	}, {
		name: "good: a container removed while alive is reported at its removal",
		h: History{Ops: []Op{life("0/lxd/1", "alive", 5, 10), life("0/lxd/1", "removed", 20, 25)},
			Streams: []Stream{kind(KindContainers, "0", d(1, 11, "machine/0/lxd/1"), d(11, 26, "machine/0/lxd/1"))}},
	}, {
		name: "lost delivery: a container watcher misses a death",
		h: History{Ops: []Op{
			life("0/lxd/1", "alive", 5, 10), life("0/lxd/1", "dead", 20, 25), life("0/lxd/2", "alive", 30, 35),
		}, Streams: []Stream{kind(KindContainers, "0", d(1, 11, "machine/0/lxd/1"), d(11, 40, "machine/0/lxd/2"))}},
		want: LostDelivery,
	}, {
		name: "duplicate delivery: a config notify watcher fires twice for one write",
		h: History{Ops: []Op{config("a", 5, 10)},
			Streams: []Stream{kind(KindConfig, "", d(1, 12, "model/u"), d(12, 30, "model/u"))}},
		want: UnjustifiedDeliv,
	}, {
		// state.WatchModelMachineStartTimes: created, life and removed of
		// top-level machines, so a removal after a death is delivered too.
		name: "good: a start-times watcher is delivered a removal after a death, not a container's",
		h: History{Ops: []Op{
			life("3", "alive", 5, 10), life("3", "dead", 20, 25), life("3", "removed", 30, 35), life("0/lxd/1", "alive", 40, 45),
		}, Streams: []Stream{kind(KindStartTimes, "", d(1, 11, "machine/3"), d(11, 26, "machine/3"), d(26, 36, "machine/3"))}},
	}, {
		name: "lost delivery: a start-times watcher misses a removal",
		h: History{Ops: []Op{
			life("3", "alive", 5, 10), life("3", "removed", 20, 25), life("4", "alive", 30, 35),
		}, Streams: []Stream{kind(KindStartTimes, "", d(1, 11, "machine/3"), d(11, 40, "machine/4"))}},
		want: LostDelivery,
	}, {
		// state.WatchMachineRemovals: one notify for any machine of the
		// model removed; two removals may fire it once.
		name: "good: a removals watcher fires once for two machines removed, not for a death",
		h: History{Ops: []Op{
			life("3", "dead", 1, 4), life("3", "removed", 5, 10), life("0/lxd/1", "removed", 6, 9),
		}, Streams: []Stream{kind(KindRemovals, "", d(1, 12, "removals"))}},
	}, {
		name: "duplicate delivery: a removals watcher fires twice for one removal",
		h: History{Ops: []Op{life("3", "dead", 1, 4), life("3", "removed", 5, 10)},
			Streams: []Stream{kind(KindRemovals, "", d(1, 12, "removals"), d(12, 30, "removals"))}},
		want: UnjustifiedDeliv,
	}, {
		// A resumed watcher's subscriptions are one stream: the first
		// value of each resumption (received at 30) is what changed while
		// it was away.
		name: "good: a resumed model watcher gets what changed while it was away in its first value",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(0, "1", "b", 20, 25, OK), w(0, "0", "c", 40, 45, OK)},
			Streams: []Stream{resumed(d(1, 11, "machine/0"), d(11, 30, "machine/1"), d(30, 46, "machine/0"))}},
	}, {
		name: "duplicate delivery: a resumed model watcher gets a change again after the resumption",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(0, "1", "b", 20, 25, OK)},
			Streams: []Stream{resumed(d(1, 11, "machine/0"), d(11, 30, "machine/0", "machine/1"))}},
		want: UnjustifiedDeliv,
	}, {
		name: "lost delivery: a resumed model watcher misses a change made while it was away",
		h: History{Ops: []Op{w(0, "0", "a", 5, 10, OK), w(0, "1", "b", 20, 25, OK), w(0, "0", "c", 40, 45, OK)},
			Streams: []Stream{resumed(d(1, 11, "machine/0"), d(11, 30), d(30, 46, "machine/0"))}},
		want: LostDelivery,
	}, {
		// state.WatchModels: a lifecycle watcher of every model; an empty
		// model's removal is reported dying, then removed.
		name: "good: a models watcher is delivered a model's addition, its dying and its removal",
		h: History{Ops: []Op{modelLife("m1", "alive", 5, 10), modelLife("m1", "dying", 20, 25), modelLife("m1", "removed", 20, 25)},
			Streams: []Stream{kind(KindModels, "", d(1, 11, "model/m1"), d(11, 22, "model/m1"), d(22, 26, "model/m1"))}},
	}, {
		name: "duplicate delivery: a models watcher reports a model's addition twice",
		h: History{Ops: []Op{modelLife("m1", "alive", 5, 10), modelLife("m2", "alive", 20, 25)},
			Streams: []Stream{kind(KindModels, "", d(1, 11, "model/m1"), d(11, 26, "model/m1", "model/m2"))}},
		want: UnjustifiedDeliv,
	}, {
		name: "good: the daemons agree on a settled register, an in-doubt write seen by all",
		h: History{Ops: []Op{
			w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 20, 25, InDoubt),
			final(on("d1", r(1, "0", "b", 40, 45))), final(on("d2", r(1, "0", "b", 40, 45))),
		}},
	}, {
		name: "daemons disagree: an in-doubt write seen by one daemon only",
		h: History{Ops: []Op{
			w(0, "0", "a", 5, 10, OK), w(0, "0", "b", 20, 25, InDoubt),
			final(on("d1", r(1, "0", "b", 40, 45))), final(on("d2", r(1, "0", "a", 40, 45))),
		}},
		want: Disagreement,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(&tc.h)
			if kinds(got) != tc.want {
				t.Fatalf("anomalies %q, want %q: %v", kinds(got), tc.want, got)
			}
		})
	}
}

// TestHistoryRoundTrip: a history saved as JSON reads back whole.
func TestHistoryRoundTrip(t *testing.T) {
	h := &History{Seed: 7, Ops: []Op{w(0, "0", "a", 5, 10, InDoubt)},
		Streams: []Stream{stream(d(1, 12, "machine/0"))}, Faults: []Fault{{Kind: FaultCompact, At: 3}}}
	path := filepath.Join(t.TempDir(), "h.json")
	if err := h.Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seed != 7 || len(got.Ops) != 1 || got.Ops[0] != h.Ops[0] || len(got.Streams[0].Deliveries) != 1 || got.Faults[0] != h.Faults[0] {
		t.Fatalf("read back %+v", got)
	}
	if s := Summarize(got).String(); !strings.Contains(s, "1 watch streams (1 deliveries") {
		t.Fatalf("summary %s", s)
	}
}

// TestCheckSavedHistory checks the history file $ROBUSTNESS_HISTORY (one a
// failing run wrote) again, printing its anomalies: for working on the
// checker or a bug it found. Skipped without it.
func TestCheckSavedHistory(t *testing.T) {
	path := os.Getenv("ROBUSTNESS_HISTORY")
	if path == "" {
		t.Skip("ROBUSTNESS_HISTORY names no history file")
	}
	h, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	as := Check(h)
	for _, a := range as {
		t.Log(a)
	}
	t.Logf("seed %d: %s; %d anomalies", h.Seed, Summarize(h), len(as))
	if len(as) > 0 {
		t.Fail()
	}
}
