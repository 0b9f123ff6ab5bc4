package main

import (
	"io"
	"testing"

	"github.com/provisiond/provisiond/internal/clidoc"
)

// docs/cli.md holds every verb and flag of provisiond as its help prints
// them; -update rewrites it.
func TestCLIReference(t *testing.T) {
	env := map[string]string{"HOME": "~"}
	root := rootCommand(sys{stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return env[k] }})
	// --max-connections' default is sized to the machine; its usage says
	// how, so the reference shows none (as for a zero default).
	got := clidoc.Render(root, map[string]string{"max-connections": "0"})
	clidoc.Check(t, "../../docs/cli.md", "provisiond", got)
}
