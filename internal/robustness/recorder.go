package robustness

import (
	"sync"

	"github.com/provisiond/provisiond/internal/robustness/checker"
)

// recorder collects the history's operations and faults; watchers keep
// their own streams. Safe for concurrent use.
type recorder struct {
	h      *harness
	mu     sync.Mutex
	ops    []checker.Op
	faults []checker.Fault
}

// call is one operation in progress: begin records its call time, end
// its outcome.
type call struct {
	r  *recorder
	op checker.Op
}

func (r *recorder) begin(client int, register, entity string, write bool, value string) *call {
	return &call{r: r, op: checker.Op{Client: client, Register: register, Entity: entity, Write: write, Value: value, Call: r.h.now()}}
}

// end records the operation's outcome, and the daemon it went through. A write's error leaves it in
// doubt (an error answer such as a timeout from etcd may come after etcd
// committed it; a broken connection says nothing); a read's error makes
// it failed (it saw nothing). value is what a read returned.
func (c *call) end(daemon string, err error, value string) checker.Op {
	c.op.Return = c.r.h.now()
	c.op.Daemon = daemon
	switch {
	case err == nil:
		c.op.Outcome = checker.OK
		if !c.op.Write {
			c.op.Value = value
		} else {
			c.r.h.lastAck.Store(c.op.Return)
		}
	case c.op.Write:
		c.op.Outcome = checker.InDoubt
		c.op.Err = err.Error()
	default:
		c.op.Outcome = checker.Failed
		c.op.Err = err.Error()
	}
	c.r.mu.Lock()
	c.r.ops = append(c.r.ops, c.op)
	c.r.mu.Unlock()
	return c.op
}

func (r *recorder) fault(f checker.Fault) {
	r.mu.Lock()
	r.faults = append(r.faults, f)
	r.mu.Unlock()
}
