package provisiondtest_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/clidoc"
)

// The complete test file of docs/developing.md ("Testing against
// provisiond", which the README points to) is internal/readme/agent_test.go,
// which go test runs: the two must stay the same.
func TestREADMETestFileIsTheOneThatRuns(t *testing.T) {
	readme, err := os.ReadFile("../docs/developing.md")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("internal/readme/agent_test.go")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i := strings.Index(text, "\n## Testing against provisiond\n")
	if i < 0 {
		t.Fatal(`docs/developing.md has no section "Testing against provisiond"`)
	}
	const open = "\n```go\n"
	j := strings.Index(text[i:], open)
	if j < 0 {
		t.Fatal("the section has no Go block")
	}
	block := text[i+j+len(open):]
	end := strings.Index(block, "\n```\n")
	if end < 0 {
		t.Fatal("the Go block is not closed")
	}
	if got, want := block[:end+1], string(file); got != want {
		t.Errorf("docs/developing.md's test file differs from internal/readme/agent_test.go; copy the file into it:\n%s", diff(got, want))
	}
}

func diff(docs, file string) string {
	line, x, y := clidoc.FirstDiff(docs, file)
	return fmt.Sprintf("line %d:\n docs:   %s\n file:   %s", line, x, y)
}
