//go:build !failpoints

package failpoint

// Enabled is false in a normal build: every call site is dead code.
const Enabled = false

// Eval does nothing in a normal build.
func Eval(string) Action { return None }
