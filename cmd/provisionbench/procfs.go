package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The daemon's memory: its resident set from /proc, and asking it to
// return freed memory first.

// rss returns the daemon's resident memory in bytes: from
// /proc/<pid>/status when the pid is known, else from the daemon's own
// /metrics (process_resident_memory_bytes).
func (t *target) rss() (int64, error) {
	if t.pid != 0 {
		return procRSS(t.pid)
	}
	v, err := t.scrape("process_resident_memory_bytes")
	return int64(v), err
}

// settle asks a child daemon to collect garbage and return freed memory
// to the OS (SIGUSR1), so RSS readings hold live memory only, and waits
// until it says it has (settleSignal).
func (t *target) settle() {
	if t.cmd != nil && t.mode == modeChild {
		settleSignal(t.cmd.Process, t.settledFile)
		return
	}
	if t.inproc != nil {
		runtime.GC()
		debug.FreeOSMemory()
	}
	time.Sleep(300 * time.Millisecond)
}

// settleWait bounds how long settleSignal waits for a child's answer.
const settleWait = time.Minute

// settleSignal sends SIGUSR1 to a child of this tool (the daemon, the echo
// server) and waits until it has collected garbage and returned the freed
// memory: the child writes "PID N LIVE STACKS" to file after its Nth
// (childSettled). It returns the child's live heap and stack bytes then
// (0, 0 if it did not answer).
// A fixed pause was not enough: at 10,000 agents on a loaded box the
// child's two collections and scavenge outlasted 300 ms, and readings
// caught a heap not yet returned (5 KiB per agent of idle pages).
func settleSignal(p *os.Process, file string) (live, stacks int64) {
	before, _ := os.ReadFile(file)
	_ = p.Signal(syscall.SIGUSR1)
	if file == "" {
		time.Sleep(300 * time.Millisecond)
		return 0, 0
	}
	deadline := time.Now().Add(settleWait)
	for time.Now().Before(deadline) {
		if now, err := os.ReadFile(file); err == nil && len(now) > 0 && string(now) != string(before) {
			var pid, n int
			_, _ = fmt.Sscan(string(now), &pid, &n, &live, &stacks)
			return live, stacks
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, 0
}

// childSettled is the child's side of settleSignal: after its nth
// collection it writes "PID n LIVE STACKS" to file (a new process's "1"
// differs from an old one's by its pid): its live heap (the objects the
// collection kept) and its goroutines' stacks, in bytes.
func childSettled(file string, n int) {
	if file == "" {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	tmp := file + ".tmp"
	if os.WriteFile(tmp, fmt.Appendf(nil, "%d %d %d %d", os.Getpid(), n, ms.HeapAlloc, ms.StackInuse), 0o600) == nil {
		_ = os.Rename(tmp, file)
	}
}

func procRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// cpuTicks is the machine's CPU time from /proc/stat's first line, in
// clock ticks: all of it, and the part the hypervisor gave to others
// while this machine had work to run (steal).
type cpuTicks struct {
	total, steal uint64
	ok           bool
}

func readCPUTicks() cpuTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}
	}
	return parseCPUTicks(string(b))
}

// parseCPUTicks reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal guest guest_nice (guest time is already in
// user and nice, so it is not added again).
func parseCPUTicks(stat string) cpuTicks {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}
	}
	var t cpuTicks
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return cpuTicks{}
		}
		t.total += v
		if i == 8 {
			t.steal = v
		}
	}
	t.ok = true
	return t
}

// stolenSince is the percentage of the CPU time since earlier that was
// stolen (NaN when either reading failed or no time passed).
func (t cpuTicks) stolenSince(earlier cpuTicks) float64 {
	if !t.ok || !earlier.ok || t.total <= earlier.total {
		return math.NaN()
	}
	return 100 * float64(t.steal-earlier.steal) / float64(t.total-earlier.total)
}
