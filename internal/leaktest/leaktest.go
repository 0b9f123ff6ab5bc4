// Package leaktest fails a test binary that leaves provisiond goroutines
// running, in the manner of etcd's MustTestMainWithLeakDetection. It has no
// dependencies outside the standard library.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs m and, if the tests passed, checks that no goroutine running
// provisiond code is left. Goroutines still shutting down get a bounded
// grace period. Use it as the body of TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Check(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Check waits up to grace for every goroutine other than the caller's that
// runs code of module provisiond to exit, and reports those that do not.
func Check(grace time.Duration) error {
	deadline := time.Now().Add(grace)
	backoff := time.Millisecond
	for {
		leaked := leakedStacks()
		if len(leaked) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leaktest: %d goroutine(s) leaked:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
		}
		// Polling is the only way to observe goroutine exit from outside;
		// this is a bounded grace period, not a wait for state to settle.
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func leakedStacks() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var leaked []string
	// The first stack is the calling goroutine's.
	for _, g := range strings.Split(string(buf), "\n\n")[1:] {
		if strings.Contains(g, "github.com/provisiond/provisiond/") && !strings.Contains(g, "testing.(*M)") {
			leaked = append(leaked, g)
		}
	}
	return leaked
}
