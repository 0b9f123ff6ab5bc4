package boltstore

import (
	"errors"
	"testing"
)

// A failed assertion of bbolt's that its check recovered is reported
// without the "panic: " bbolt puts before it; other problems as they are.
func TestCheckProblem(t *testing.T) {
	for in, want := range map[string]string{
		"panic: assertion failed: Page expected to be: 4, but self identifies as 18446744073709551611": "assertion failed: Page expected to be: 4, but self identifies as 18446744073709551611",
		"page 7: unreachable unfreed": "page 7: unreachable unfreed",
	} {
		if got := checkProblem(errors.New(in)).Error(); got != want {
			t.Errorf("checkProblem(%q) = %q, want %q", in, got, want)
		}
	}
}
