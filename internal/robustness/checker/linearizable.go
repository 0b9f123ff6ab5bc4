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

// unknown is the register's state before anything is known of it: the
// first read may return anything (the value it had before the run) and
// fixes it.
const unknown = "\x00unknown"

type regInput struct {
	write bool
	value string
}

// registerModel is a single value written and read whole.
var registerModel = porcupine.Model{
	Init: func() any { return unknown },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.value
		}
		got := output.(string)
		if state.(string) == unknown {
			return true, got
		}
		return got == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			return fmt.Sprintf("write %q", in.value)
		}
		return fmt.Sprintf("read %q", output)
	},
}

// Linearizable checks each register's operations against a register
// model and returns one anomaly per register that fails.
func Linearizable(ops []Op) []Anomaly {
	byReg := map[string][]porcupine.Operation{}
	for _, op := range ops {
		if op.Outcome == Failed {
			continue // a refused write did not happen; a failed read saw nothing
		}
		if !op.Write && op.Outcome != OK {
			continue
		}
		ret := op.Return
		if op.Outcome == InDoubt {
			// It may take effect at any time after its call.
			ret = math.MaxInt64
		}
		byReg[op.Register] = append(byReg[op.Register], porcupine.Operation{
			ClientId: op.Client, Input: regInput{write: op.Write, value: op.Value},
			Call: op.Call, Output: op.Value, Return: ret,
		})
	}
	regs := make([]string, 0, len(byReg))
	for r := range byReg {
		regs = append(regs, r)
	}
	sort.Strings(regs)
	var out []Anomaly
	for _, r := range regs {
		switch porcupine.CheckOperationsTimeout(registerModel, byReg[r], CheckTimeout) {
		case porcupine.Illegal:
			out = append(out, Anomaly{Kind: NotLinearizable, Detail: fmt.Sprintf("register %s: %s", r, describe(byReg[r]))})
		case porcupine.Unknown:
			out = append(out, Anomaly{Kind: Undecided, Detail: fmt.Sprintf("register %s: %d operations not decided in %s", r, len(byReg[r]), CheckTimeout)})
		}
	}
	return out
}

// describe lists a register's operations (the last 12), for a report.
func describe(ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	if len(sorted) > 12 {
		sorted = sorted[len(sorted)-12:]
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
