package main

import (
	"errors"
	"fmt"
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
// to the OS (SIGUSR1), so RSS readings hold live memory only.
func (t *target) settle() {
	if t.cmd != nil && t.mode == modeChild {
		_ = t.cmd.Process.Signal(syscall.SIGUSR1)
	}
	if t.inproc != nil {
		runtime.GC()
		debug.FreeOSMemory()
	}
	time.Sleep(300 * time.Millisecond)
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
