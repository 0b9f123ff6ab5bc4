package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// reniceSelf gives every thread of this process the nice value n (a load
// generator's, --loadgen-nice). Linux keeps nice per thread and a new
// thread takes its creator's, so once every thread has n so does every
// later one; a thread the runtime starts during the pass is caught by the
// next. It fails unless every thread has n afterwards.
func reniceSelf(n int) error {
	for range 10 {
		tids, err := threads()
		if err != nil {
			return err
		}
		changed := false
		for _, tid := range tids {
			cur, err := threadNice(tid)
			if err != nil {
				continue // the thread has exited
			}
			if cur == n {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, n); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("setting thread %d's nice to %d: %w", tid, n, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("threads still starting with another nice than %d", n)
}

// threads are this process's thread ids.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, tid)
		}
	}
	return out, nil
}

// threadNice is thread tid's nice value (/proc/self/task/TID/stat, the
// 19th field).
func threadNice(tid int) (int, error) {
	f, err := statFields(fmt.Sprintf("/proc/self/task/%d/stat", tid), 17)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[16]) // field 19
}
