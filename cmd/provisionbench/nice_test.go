package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// reniceSelf in a process of its own (this test binary re-executed): every
// thread, those the runtime starts afterwards too, has the nice value.
func TestReniceSelf(t *testing.T) {
	if os.Getenv("PROVISIONBENCH_RENICE_CHILD") == "1" {
		if err := reniceSelf(7); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		done := make(chan struct{})
		for range 8 { // goroutines blocked in system calls: the runtime starts threads for them
			go func() { time.Sleep(50 * time.Millisecond); done <- struct{}{} }()
		}
		for range 8 {
			<-done
		}
		tids, err := threads()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for _, tid := range tids {
			if n, err := threadNice(tid); err == nil && n != 7 {
				fmt.Printf("error: thread %d has nice %d\n", tid, n)
				os.Exit(1)
			}
		}
		fmt.Printf("ok %d threads\n", len(tids))
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestReniceSelf$")
	cmd.Env = append(os.Environ(), "PROVISIONBENCH_RENICE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok ") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
