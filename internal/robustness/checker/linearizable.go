package checker

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// CheckTimeout bounds porcupine's search on one register: a register whose
// check runs longer is reported as an anomaly of its own kind
// (Undecided), not taken as linearizable.
var CheckTimeout = time.Minute

// Undecided: porcupine did not decide a register within CheckTimeout.
const Undecided = "linearizability undecided"

// What a daemon promises about reads (docs/scale-out.md, "Reads are
// local"): writes are linearizable (one etcd transaction each), but a
// daemon reads from its replica of etcd, which applies etcd's revisions in
// order a moment after they commit, except that a daemon applies its own
// write before answering it. So a read through daemon D may miss another
// daemon's recent write, but never goes back, never misses D's own
// acknowledged writes, and never misses a write that returned before D
// was asked for a write it acknowledged (D had applied everything up to
// that one's revision by then, and so, by the time a read through D
// returned a write's value, every write that returned before that write
// was called).
//
// Each register is therefore checked once per daemon with porcupine: the
// register's writes (through any daemon) and the reads through D. A write
// made through D keeps its return time; an acknowledged write made
// through another daemon is visible on D by the earliest return of a
// write D acknowledged, or of a read through D that saw a write, called
// after it returned (infinite if none); a
// write in doubt may take effect at any time after its call (an infinite
// return, as etcd's own robustness tests give it). The model is a
// register that applies its writes in their order (one writer at a time:
// write k+1 was called after write k returned, so it has the later
// revision). A write in doubt that never landed is then taken as landing
// just before the next write: that can only hide an anomaly in that
// moment, never make one up.

// regState is the register: the last write applied, and its value. Before
// any write it holds the value it had before the run, unknown until a
// read returns a value no write wrote.
type regState struct {
	index int // of the last write applied; -1 before any
	value string
	known bool
}

type regInput struct {
	write   bool
	index   int // the write's place among the register's writes
	value   string
	written bool // a read: some write of the register wrote the value it returned
	absent  bool // a read that found nothing (Op.Absent)
}

// registerModel is a single value, written whole in order, read whole.
var registerModel = porcupine.Model{
	Init: func() any { return regState{index: -1} },
	Step: func(state, input, output any) (bool, any) {
		st, in := state.(regState), input.(regInput)
		if in.write {
			// In order, none skipped: the search then only ever holds a
			// prefix of the writes, which keeps it small (with skips
			// allowed, a daemon cut off for two seconds behind forty
			// writes made it explore which of them to skip).
			return in.index == st.index+1, regState{index: in.index, value: in.value, known: true}
		}
		got := output.(string)
		if in.absent && st.index == -1 {
			return true, st // not written yet
		}
		if !in.written {
			// No write wrote it: the value before the run, read before
			// any write took effect.
			ok := st.index == -1 && (!st.known || st.value == got)
			return ok, regState{index: -1, value: got, known: true}
		}
		return st.index >= 0 && got == st.value, st
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("write #%d %q", in.index, in.value)
		}
		return fmt.Sprintf("read %q", output)
	},
}

// Linearizable checks each register's operations, once per daemon that
// served reads of it, against the register model (see above) and returns
// one anomaly per register and daemon that fails.
func Linearizable(ops []Op) []Anomaly {
	vis := visibility(ops)
	writes := map[string][]Op{}           // by register, in call order
	reads := map[string]map[string][]Op{} // by register, then daemon
	for _, op := range ops {
		switch {
		case op.Outcome == Failed:
			// A refused write did not happen; a failed read saw nothing.
		case op.Write:
			writes[op.Register] = append(writes[op.Register], op)
		case op.Outcome == OK:
			if reads[op.Register] == nil {
				reads[op.Register] = map[string][]Op{}
			}
			reads[op.Register][op.Daemon] = append(reads[op.Register][op.Daemon], op)
		}
	}
	regs := make([]string, 0, len(reads))
	for r := range reads {
		regs = append(regs, r)
	}
	sort.Strings(regs)
	var out []Anomaly
	for _, r := range regs {
		ws := writes[r]
		sort.SliceStable(ws, func(i, j int) bool { return ws[i].Call < ws[j].Call })
		daemons := make([]string, 0, len(reads[r]))
		for d := range reads[r] {
			daemons = append(daemons, d)
		}
		sort.Strings(daemons)
		written := map[string]bool{}
		for _, w := range ws {
			written[w.Value] = true
		}
		for _, d := range daemons {
			hist := make([]porcupine.Operation, 0, len(ws)+len(reads[r][d]))
			for k, w := range ws {
				ret := int64(math.MaxInt64)
				switch {
				case w.Outcome != OK:
				case w.Daemon == d:
					ret = w.Return
				default:
					ret = vis.by(d, w.Return)
				}
				hist = append(hist, porcupine.Operation{ClientId: w.Client, Input: regInput{write: true, index: k, value: w.Value},
					Call: w.Call, Output: "", Return: ret})
			}
			for _, rd := range reads[r][d] {
				hist = append(hist, porcupine.Operation{ClientId: rd.Client, Input: regInput{written: written[rd.Value], absent: rd.Absent},
					Call: rd.Call, Output: rd.Value, Return: rd.Return})
			}
			switch porcupine.CheckOperationsTimeout(registerModel, hist, CheckTimeout) {
			case porcupine.Illegal:
				out = append(out, Anomaly{Kind: NotLinearizable, Detail: fmt.Sprintf("register %s read through %s: %s", r, d, describe(hist))})
			case porcupine.Unknown:
				out = append(out, Anomaly{Kind: Undecided, Detail: fmt.Sprintf("register %s read through %s: %d operations not decided in %s", r, d, len(hist), CheckTimeout)})
			}
		}
	}
	return out
}

// visibilityIndex answers, per daemon, by when a write that returned at
// some time is certainly applied there: the earliest return of the
// evidence (below) of a write called after that time.
type visibilityIndex map[string]struct {
	calls  []int64 // of the writes the evidence shows applied, ascending
	minRet []int64 // minRet[i]: the earliest return among calls[i:]
}

// The evidence that a daemon had applied everything up to a write's
// revision: a write it acknowledged (applied by its return), and a read
// through it that returned a write's value (values are unique: that
// write's revision was applied by the read's return). Either way, every
// write that returned before that write was called has an earlier
// revision, and the replica applies revisions in order.
func visibility(ops []Op) visibilityIndex {
	callOf := map[[2]string]int64{} // (register, value) -> the call of the write of it
	for _, op := range ops {
		if op.Write && op.Outcome != Failed {
			callOf[[2]string{op.Register, op.Value}] = op.Call
		}
	}
	byDaemon := map[string][]Op{} // evidence: Call of the write seen, Return when it was seen
	for _, op := range ops {
		if op.Daemon == "" || op.Outcome != OK {
			continue
		}
		switch {
		case op.Write:
			byDaemon[op.Daemon] = append(byDaemon[op.Daemon], op)
		case !op.Absent:
			if c, ok := callOf[[2]string{op.Register, op.Value}]; ok {
				byDaemon[op.Daemon] = append(byDaemon[op.Daemon], Op{Call: c, Return: op.Return})
			}
		}
	}
	v := visibilityIndex{}
	for d, ws := range byDaemon {
		sort.Slice(ws, func(i, j int) bool { return ws[i].Call < ws[j].Call })
		e := v[d]
		e.calls = make([]int64, len(ws))
		e.minRet = make([]int64, len(ws))
		m := int64(math.MaxInt64)
		for i := len(ws) - 1; i >= 0; i-- {
			e.calls[i] = ws[i].Call
			m = min(m, ws[i].Return)
			e.minRet[i] = m
		}
		v[d] = e
	}
	return v
}

func (v visibilityIndex) by(daemon string, returned int64) int64 {
	e, ok := v[daemon]
	if !ok {
		return math.MaxInt64
	}
	i := sort.Search(len(e.calls), func(i int) bool { return e.calls[i] > returned })
	if i == len(e.calls) {
		return math.MaxInt64
	}
	return e.minRet[i]
}

// describe lists a register's operations (the last 16), for a report.
func describe(ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	if len(sorted) > 16 {
		sorted = sorted[len(sorted)-16:]
	}
	s := ""
	for _, op := range sorted {
		ret := "∞"
		if op.Return != math.MaxInt64 {
			ret = fmt.Sprint(time.Duration(op.Return))
		}
		s += fmt.Sprintf("\n  client %d [%s, %s] %s", op.ClientId, time.Duration(op.Call), ret,
			registerModel.DescribeOperation(op.Input, op.Output))
	}
	return s
}
