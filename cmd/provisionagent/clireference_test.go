package main

import (
	"bytes"
	"testing"

	"github.com/provisiond/provisiond/internal/clidoc"
)

// docs/cli.md holds provisionagent's flags as its help prints them;
// -update rewrites it.
func TestCLIReference(t *testing.T) {
	var out bytes.Buffer
	if code := run(t.Context(), []string{"--help"}, &out, &out, func(string) string { return "" }); code != 0 {
		t.Fatalf("provisionagent --help: exit %d: %s", code, out.String())
	}
	clidoc.Check(t, "../../docs/cli.md", "provisionagent", clidoc.Trim(clidoc.Section(2, "provisionagent", out.String())))
}
