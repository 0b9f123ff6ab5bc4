// Package checker checks a robustness run's recorded history: the
// operations clients made (each with its call and return time and its
// outcome) and what every watcher was delivered. It knows nothing of how
// the history was made (internal/robustness records it); it is the model
// the history must fit:
//
//   - Linearizability (Linearizable): every register (one stored value,
//     such as a machine's status or a model config key) is checked with
//     porcupine, the checker etcd's own robustness tests use, against a
//     register model, once per daemon that served reads of it: writes are
//     linearizable, and a daemon's reads see its own acknowledged writes
//     and never go back, but may miss another daemon's latest write for a
//     moment (linearizable.go has the exact rule). A write in doubt (its
//     reply never came, or came as an error: the daemon may have sent it
//     to etcd before it failed) may or may not have taken effect, at any
//     moment after its call: it is given an infinite return time, as
//     etcd's tests do.
//   - Watch delivery (Watches): each watcher stream (one WatchModel
//     subscription, from its start to its end) is checked against the
//     writes. A daemon applies etcd's commits to its feed in revision
//     order a moment after the writer's answer, so a stream is bound to
//     the order of the writes, not to their answers: no entity is
//     delivered without a write to justify it (nothing invented, nothing
//     delivered more often than written); an acknowledged write committed
//     after the stream started is delivered no later than any write
//     called after it returned (none lost, none out of order); a stream
//     ends in a reset only where the harness compacted etcd.
//
// Times are nanoseconds since the run's start, as the recorder takes them.
package checker

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// Outcome is how an operation ended.
type Outcome string

const (
	// OK: the reply said it was done (a write acknowledged, a read's value).
	OK Outcome = "ok"
	// Failed: a definite refusal (the write did not happen); a failed
	// read tells nothing and is left out.
	Failed Outcome = "failed"
	// InDoubt: no reply (timeout, broken connection) or an error that
	// does not say the write was not made: it may have happened.
	InDoubt Outcome = "indoubt"
)

// Op is one operation on one register.
type Op struct {
	Client   int    `json:"client"`
	Daemon   string `json:"daemon"`           // the daemon it went through
	Register string `json:"register"`         // e.g. "machine/3#status"
	Entity   string `json:"entity,omitempty"` // what WatchModel names for a change of it ("machine/3"); "" if not watched
	Model    string `json:"model,omitempty"`  // the model it is in, "" for the default model
	Write    bool   `json:"write"`
	Value    string `json:"value"` // written, or read ("" for absent)
	Call     int64  `json:"call"`
	Return   int64  `json:"return"`
	// Absent marks a read that found nothing: the register holds Value
	// (what a removal writes) or has not been written yet (a daemon that
	// has not seen the addition either).
	Absent bool `json:"absent,omitempty"`
	// Final marks a read of the settled run's last round, made through
	// every daemon once every fault was healed (Agreement).
	Final   bool    `json:"final,omitempty"`
	Outcome Outcome `json:"outcome"`
	Err     string  `json:"err,omitempty"`
}

// Delivery is one value a watcher received: Next was called at Next and
// its result arrived at Recv, naming Entities (Next is kept for a reader
// of the history; the checks need only Recv).
type Delivery struct {
	Next     int64    `json:"next"`
	Recv     int64    `json:"recv"`
	Entities []string `json:"entities"`
}

// End reasons of a stream.
const (
	EndStopped = "stopped" // the harness stopped it (end of run)
	EndReset   = "reset"   // the watcher failed with a reset (its feed was compacted past)
	EndBroken  = "broken"  // the connection broke (daemon killed or stopped, a member lost)
)

// Stream is one watcher subscription: the Watch call at Start returned
// at Started; from then on it delivered Deliveries until End.
type Stream struct {
	Watcher string `json:"watcher"`
	// Kind is the watcher's kind (KindModel if ""), Scope what it watches
	// where the kind needs one (a host machine, an application).
	Kind       string     `json:"kind,omitempty"`
	Scope      string     `json:"scope,omitempty"`
	Daemon     string     `json:"daemon"`
	Start      int64      `json:"start"`
	Started    int64      `json:"started"`
	Deliveries []Delivery `json:"deliveries"`
	End        int64      `json:"end"`
	EndReason  string     `json:"end_reason"`
	// Resumes is how many times the stream went on in a watch resumed
	// from a revision after its connection broke (KindModelResumed).
	Resumes int    `json:"resumes,omitempty"`
	EndErr  string `json:"end_err,omitempty"`
}

// Fault is one fault the harness injected, from At until it was undone
// (Healed; 0 for an instant fault such as a compaction).
type Fault struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Daemon string `json:"daemon,omitempty"` // the daemon it befell, if it was one
	At     int64  `json:"at"`
	Healed int64  `json:"healed,omitempty"`
	// Recovery is how long after the fault was healed (or made, for an
	// instant one) the daemon it befell first answered (for a fault of
	// etcd: the first write acknowledged); 0 if it never did.
	Recovery int64 `json:"recovery,omitempty"`
}

// History is everything a run recorded.
type History struct {
	Seed    uint64   `json:"seed"`
	Ops     []Op     `json:"ops"`
	Streams []Stream `json:"streams"`
	Faults  []Fault  `json:"faults"`
}

// Anomaly kinds.
const (
	NotLinearizable  = "not linearizable"
	LostDelivery     = "lost delivery"
	UnjustifiedDeliv = "delivery without a write" // invented or duplicated
	Reordered        = "delivered out of order"
	UnexpectedReset  = "reset without compaction"
	Disagreement     = "daemons disagree" // a settled register read differently through two daemons
)

// Anomaly is one thing the history shows that must not happen.
type Anomaly struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

func (a Anomaly) String() string { return a.Kind + ": " + a.Detail }

// Check runs every check on h.
func Check(h *History) []Anomaly {
	return slices.Concat(Linearizable(h.Ops), Watches(h), Agreement(h.Ops))
}

// Write saves h as JSON to path.
func (h *History) Write(path string) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Read loads a history Write saved.
func Read(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &h, nil
}

// Summary is a history's figures.
type Summary struct {
	Ops, Writes, Acked, InDoubt, Reads int
	Registers                          int
	Streams, Deliveries, Resets        int
	Resumes                            int // of streams resumed from a revision
	Faults                             map[string]int
	// Kinds: per watcher kind, its streams and deliveries.
	Kinds map[string][2]int
}

// Summarize counts h.
func Summarize(h *History) Summary {
	s := Summary{Faults: map[string]int{}, Kinds: map[string][2]int{}}
	regs := map[string]bool{}
	for _, op := range h.Ops {
		s.Ops++
		regs[op.Register] = true
		switch {
		case !op.Write:
			s.Reads++
		case op.Outcome == OK:
			s.Writes++
			s.Acked++
		case op.Outcome == InDoubt:
			s.Writes++
			s.InDoubt++
		default:
			s.Writes++
		}
	}
	s.Registers = len(regs)
	for _, st := range h.Streams {
		s.Streams++
		s.Deliveries += len(st.Deliveries)
		k := s.Kinds[kindOf(st)]
		k[0]++
		k[1] += len(st.Deliveries)
		s.Kinds[kindOf(st)] = k
		if st.EndReason == EndReset {
			s.Resets++
		}
		s.Resumes += st.Resumes
	}
	for _, f := range h.Faults {
		s.Faults[f.Kind]++
	}
	return s
}

func (s Summary) String() string {
	kinds := make([]string, 0, len(s.Faults))
	n := 0
	for k, v := range s.Faults {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, v))
		n += v
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%d ops on %d registers (%d writes: %d acknowledged, %d in doubt; %d reads), "+
		"%d watch streams (%d deliveries, %d resets, %d resumptions), %d faults (%s)",
		s.Ops, s.Registers, s.Writes, s.Acked, s.InDoubt, s.Reads, s.Streams, s.Deliveries, s.Resets, s.Resumes, n, strings.Join(kinds, ", "))
}
