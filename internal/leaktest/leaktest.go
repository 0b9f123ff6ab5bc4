// Package leaktest is provisiond's one goroutine leak checker, in the
// manner of etcd's MustTestMainWithLeakDetection: Main (or Run) fails a test
// binary that leaves provisiond goroutines running, and Stacks and
// WaitAtMost let a test count the goroutines of one piece of code exactly.
//
// It looks only at goroutines running code of this module, which are the
// ones provisiond owns and must stop ("every goroutine has an owner");
// net/http's, the runtime's and the testing package's own goroutines are
// none of its business. That is why it is not go.uber.org/goleak, which
// checks every goroutine of the process and needs an ignore list for each
// library a test touches, and offers no count of one function's
// goroutines. It has no dependencies outside the standard library.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// module is in the stack of every goroutine running provisiond code.
const module = "github.com/provisiond/provisiond/"

// Grace bounds how long Main and Run wait for goroutines still shutting
// down, and WaitAtMost for a count to drop.
const Grace = 5 * time.Second

// Main runs m and, if the tests passed, checks that no goroutine running
// provisiond code is left; then it exits. Use it as the body of TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with cleanup of its own to do before
// os.Exit (deferred functions do not run after os.Exit): it returns the
// exit code instead of exiting.
func Run(m *testing.M) int {
	code := m.Run()
	if code == 0 {
		if err := Check(Grace); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// Check waits up to grace for every goroutine other than the caller's that
// runs provisiond code to exit, and reports those that do not.
func Check(grace time.Duration) error {
	leaked := waitFor(grace, func(stacks []string) bool { return len(stacks) == 0 })
	if len(leaked) == 0 {
		return nil
	}
	return fmt.Errorf("leaktest: %d goroutine(s) leaked:\n\n%s", len(leaked), strings.Join(leaked, "\n\n"))
}

// Stacks returns the stacks of the live goroutines, other than the
// caller's and the test binary's main goroutine, that run provisiond code
// and contain every one of substrings (typically function names such as
// "provisiond/rpc.(*Conn).write").
func Stacks(substrings ...string) []string {
	var out []string
	for _, g := range allStacks() {
		if matches(g, substrings) {
			out = append(out, g)
		}
	}
	return out
}

// WaitAtMost waits (up to Grace) until at most n goroutines match
// substrings (see Stacks), and fails tb with their stacks otherwise.
func WaitAtMost(tb testing.TB, n int, substrings ...string) {
	tb.Helper()
	waitFor(Grace, func([]string) bool { return len(Stacks(substrings...)) <= n })
	if left := Stacks(substrings...); len(left) > n {
		tb.Fatalf("leaktest: %d goroutine(s) matching %q after %v, want at most %d:\n\n%s",
			len(left), substrings, Grace, n, strings.Join(left, "\n\n"))
	}
}

// waitFor polls the module's goroutines until done accepts them or grace
// has passed, and returns the last ones seen. Polling is the only way to
// observe goroutines exit from outside; it is bounded, not a wait for
// things to settle.
func waitFor(grace time.Duration, done func(stacks []string) bool) []string {
	deadline := time.Now().Add(grace)
	backoff := time.Millisecond
	for {
		stacks := Stacks()
		if done(stacks) || time.Now().After(deadline) {
			return stacks
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func matches(g string, substrings []string) bool {
	if !strings.Contains(g, module) || strings.Contains(g, "testing.(*M)") {
		return false
	}
	for _, s := range substrings {
		if !strings.Contains(g, s) {
			return false
		}
	}
	return true
}

// allStacks returns the stack of every goroutine but the caller's.
func allStacks() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	// The first stack is the calling goroutine's.
	return strings.Split(string(buf), "\n\n")[1:]
}
