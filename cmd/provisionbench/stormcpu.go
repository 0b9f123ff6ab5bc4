package main

import (
	"os"
	"runtime"
	"time"
)

// stormCPU reads what a storm costs in CPU: the restarted daemons' from
// their start (the new processes: their start, their replica's load, the
// agents' handshakes, logins and watch calls), the agents' processes'
// (the load generators, or this process) and the tool's etcd member's
// from the restart; each over the agents back. Their sum over the box's
// cores is the least wall time the storm could take on this box however
// its work were scheduled: what bounds "all back" when the box is the
// limit.
type stormCPU struct {
	agents []int // the agents' processes
	etcd   int   // the tool's etcd member, or 0
	a0, e0 time.Duration
	ok     bool
}

// startStormCPU reads the agents' processes and the etcd member (0: none)
// as the storm begins.
func startStormCPU(agents []int, etcd int) *stormCPU {
	s := &stormCPU{agents: agents, etcd: etcd}
	var err error
	s.a0, err = sumCPU(agents)
	s.ok = err == nil
	if etcd != 0 && s.ok {
		s.e0, err = procCPU(etcd)
		s.ok = err == nil
	}
	return s
}

// set adds the rows for n agents back, the daemons being the processes
// daemons now (the restarted ones); it adds nothing if a process could
// not be read.
func (s *stormCPU) set(v *values, daemons []int, n int) {
	if !s.ok || n <= 0 || len(daemons) == 0 {
		return
	}
	a1, err := sumCPU(s.agents)
	if err != nil {
		return
	}
	agents := a1 - s.a0
	var d, et time.Duration
	if self := os.Getpid(); len(daemons) != 1 || daemons[0] != self {
		if d, err = sumCPU(daemons); err != nil {
			return
		}
	}
	if s.etcd != 0 {
		e1, err := procCPU(s.etcd)
		if err != nil {
			return
		}
		et = e1 - s.e0
	}
	per := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1e3 / float64(n) }
	if d > 0 {
		v.set("CPU per agent back: daemons, from their start", "ms", per(d))
		v.set("CPU per agent back: the agents' processes", "ms", per(agents))
	} else {
		v.set("CPU per agent back: daemon and agents (one process)", "ms", per(agents))
	}
	if s.etcd != 0 {
		v.set("CPU per agent back: etcd", "ms", per(et))
	}
	v.set("CPU of the storm over the box's cores", "s", (d+agents+et).Seconds()/float64(runtime.NumCPU()))
}
