package main

import (
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/clidoc"
)

// docs/cli.md holds every verb and flag of provisionctl as its help prints
// them; -update rewrites it.
func TestCLIReference(t *testing.T) {
	env := map[string]string{"HOME": "~"}
	a := &app{stdout: &strings.Builder{}, stderr: &strings.Builder{}, getenv: func(k string) string { return env[k] }}
	clidoc.Check(t, "../../docs/cli.md", "provisionctl", clidoc.Render(a.rootCommand(), nil))
}
