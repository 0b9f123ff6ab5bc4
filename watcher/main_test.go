package watcher_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// leakWait bounds how long TestMain waits for goroutines started by the
// tests (blocked Next calls, concurrent publishers) to finish.
const leakWait = 5 * time.Second

// TestMain fails the run if the tests leave goroutines behind. Package
// watcher starts none of its own (style §6.6): this guards that, and that
// every goroutine a test starts also ends.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(leakWait); after > before && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		after = runtime.NumGoroutine()
	}
	if after > before {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		fmt.Fprintf(os.Stderr, "FAIL: goroutine leak: %d goroutines before the tests, %d after %v\n\n%s\n",
			before, after, leakWait, buf)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}
