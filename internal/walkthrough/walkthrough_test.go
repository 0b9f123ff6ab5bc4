package walkthrough_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// Bounds of the waits: one command, and the agent acting on what the
// walk-through asked for.
const (
	commandTimeout = 60 * time.Second
	agentTimeout   = 60 * time.Second
)

// The notation of the walk-throughs (README.md's and docs/provisionctl.md's),
// as the test reads it:
//
//   - In a ```sh block, a line not starting with "#" is a command; a
//     trailing "\" continues it on the next line; "# ..." after it is a
//     comment. A trailing "&" runs it in the background.
//   - The "# " lines below a command are all it prints (stdout and stderr,
//     blank lines aside), in order. A line that is only "..." stands for
//     any number of lines. "(on stderr)" after two or more spaces is a
//     remark, and so is one that speaks of a terminal; "(from watch)"
//     marks a line printed by the background watch.
//   - In a line, "..." stands for any characters but spaces, and absorbs
//     the hex digits right before it ("9a2e..." is any UUID); an RFC 3339
//     time stands for any time; runs of spaces match runs of spaces.
//   - A command whose output shows an ERROR line must fail (exit 1, or 2
//     for input that is not valid);
//     every other must succeed.
//   - Commands that only read (status, models, ...) are run again after
//     each change to their model until their output matches (the agent
//     acts asynchronously), for at most agentTimeout. Others run once.
//   - "make build" is done by the test; "kill %?watch" stops the
//     background watch.

type expect struct {
	re        *regexp.Regexp // nil: "...", any lines
	text      string
	fromWatch bool
}

type step struct {
	file   string // README.md or docs/provisionctl.md
	line   int    // in file
	cmd    string
	expect []expect
}

var (
	remark    = regexp.MustCompile(`\s{2,}\((on stderr|from watch|[^)]*terminal[^)]*)\)\s*$`)
	timestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
	wildcard  = regexp.MustCompile(`(^|[^0-9A-Za-z])[0-9a-f]{0,8}\.\.\.`)
)

// pattern turns an expected line into a regular expression.
func pattern(line string) *regexp.Regexp {
	var parts []string
	for _, tok := range strings.Fields(line) {
		switch {
		case tok == "...":
			parts = append(parts, `.*`)
		case timestamp.MatchString(tok):
			parts = append(parts, `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
		default:
			var b strings.Builder
			last := 0
			for _, m := range wildcard.FindAllStringSubmatchIndex(tok, -1) {
				// m[2]:m[3] is the character before the wildcard, kept.
				b.WriteString(regexp.QuoteMeta(tok[last:m[3]]))
				b.WriteString(`\S*`)
				last = m[1]
			}
			b.WriteString(regexp.QuoteMeta(tok[last:]))
			parts = append(parts, b.String())
		}
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `\s+`) + `$`)
}

// parseBlocks returns the commands of the ```sh blocks of file's section
// titled heading (up to the next heading of any level); text is the file.
func parseBlocks(t *testing.T, file string, text []byte, heading string) []step {
	t.Helper()
	var steps []step
	in, inBlock := false, false
	var cur *step
	cont := false
	for i, raw := range strings.Split(string(text), "\n") {
		line := strings.TrimRight(raw, " \t")
		if strings.HasPrefix(line, "#") && !inBlock {
			in = strings.TrimLeft(line, "# ") == heading
			continue
		}
		if !in {
			continue
		}
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock && line == "```sh"
			cur, cont = nil, false
			continue
		}
		if !inBlock {
			continue
		}
		switch {
		case cont:
			cur.cmd += " " + strings.TrimSpace(strings.TrimSuffix(line, `\`))
			cont = strings.HasSuffix(line, `\`)
		case line == "" || line == "#":
		case strings.HasPrefix(line, "# "):
			if cur == nil {
				t.Fatalf("%s:%d: output line before any command", file, i+1)
			}
			text := strings.TrimPrefix(line, "# ")
			e := expect{fromWatch: strings.HasSuffix(text, "(from watch)"), text: text}
			text = remark.ReplaceAllString(text, "")
			if strings.TrimSpace(text) != "..." {
				e.re = pattern(text)
			}
			cur.expect = append(cur.expect, e)
		default:
			steps = append(steps, step{file: file, line: i + 1, cmd: strings.TrimSpace(strings.TrimSuffix(line, `\`))})
			cur = &steps[len(steps)-1]
			cont = strings.HasSuffix(line, `\`)
		}
	}
	if len(steps) == 0 {
		t.Fatalf("%s has no commands under %q", file, heading)
	}
	return steps
}

// background is a command running in the background, its output kept.
type background struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  []string
	more chan struct{} // closed and replaced on each new line
	done chan struct{}
}

func (b *background) lines() ([]string, chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out, b.more
}

type env struct {
	t    *testing.T
	dir  string
	vars []string
	bg   []*background
	api  *client.Conn
}

func (e *env) command(ctx context.Context, line string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir, cmd.Env = e.dir, e.vars
	return cmd
}

// start runs line in the background, keeping its output.
func (e *env) start(line string) *background {
	e.t.Helper()
	cmd := e.command(context.Background(), "exec "+line)
	pr, pw, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	pw.Close()
	b := &background{cmd: cmd, more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			b.mu.Lock()
			b.out = append(b.out, sc.Text())
			close(b.more)
			b.more = make(chan struct{})
			b.mu.Unlock()
			if testing.Verbose() {
				e.t.Logf("[%s] %s", strings.Fields(line)[0], sc.Text())
			}
		}
		_ = cmd.Wait()
		pr.Close()
	}()
	e.bg = append(e.bg, b)
	e.t.Cleanup(func() { stop(e.t, b) })
	return b
}

func stop(t *testing.T, b *background) {
	if b.cmd.ProcessState == nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		t.Errorf("%v did not stop on SIGTERM", b.cmd.Args)
	}
}

// waitLine waits until b prints a line matching re after line from, and
// returns the index after it.
func waitLine(t *testing.T, b *background, from int, re *regexp.Regexp, what string) int {
	t.Helper()
	deadline := time.NewTimer(agentTimeout)
	defer deadline.Stop()
	for {
		out, more := b.lines()
		for i := from; i < len(out); i++ {
			if re.MatchString(out[i]) {
				return i + 1
			}
		}
		select {
		case <-more:
		case <-b.done:
			t.Fatalf("%s: the background command ended; it printed:\n%s", what, strings.Join(out, "\n"))
		case <-deadline.C:
			t.Fatalf("%s: no line like %q within %v; it printed:\n%s", what, re, agentTimeout, strings.Join(out, "\n"))
		}
	}
}

// matches reports whether the output lines are what the walk-through shows.
func matches(out []string, want []expect) bool {
	var lines []string
	for _, l := range out {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, " "))
		}
	}
	var ws []expect
	for _, w := range want {
		if !w.fromWatch {
			ws = append(ws, w)
		}
	}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if j == len(ws) {
			return i == len(lines)
		}
		if ws[j].re == nil {
			for k := i; k <= len(lines); k++ {
				if match(k, j+1) {
					return true
				}
			}
			return false
		}
		return i < len(lines) && ws[j].re.MatchString(lines[i]) && match(i+1, j+1)
	}
	return match(0, 0)
}

var readOnly = map[string]bool{
	"models": true, "status": true, "storage-pools": true, "subnets": true, "spaces": true,
	"agent-binaries": true, "machines": true, "units": true, "show-machine": true, "show-unit": true,
	"show-application": true, "show-controller": true, "version": true,
}

// reader reports whether cmd only reads, and the model it reads ("" for
// the list of models).
func reader(cmd string) (bool, string) {
	f := strings.Fields(cmd)
	if len(f) < 2 || !strings.HasSuffix(f[0], "provisionctl") {
		return false, ""
	}
	verb, model := f[1], "default"
	ro := readOnly[verb]
	for i, a := range f[2:] {
		if (a == "-m" || a == "--model") && i+3 < len(f) {
			model = f[i+3]
		}
		if (verb == "model-config" || verb == "config") && strings.Contains(a, "=") {
			return false, ""
		}
	}
	if verb == "model-config" || verb == "config" {
		ro = true
	}
	if verb == "models" {
		model = ""
	}
	return ro, model
}

// watch opens a watcher that fires on every change the command's output
// could show: the model's change feed, or the list of models.
func (e *env) watch(ctx context.Context, model string) func() error {
	e.t.Helper()
	var wr params.StringsWatchResult
	method, args := "WatchModel", any(params.ModelArgs{Model: model})
	if model == "" {
		method, args = "WatchModels", nil
	}
	if err := e.api.Call(ctx, "ModelAdmin", 1, "", method, args, &wr); err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
	w := client.NewStringsWatcher(e.api, wr.StringsWatcherId)
	e.t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return func() error { _, err := w.Next(ctx); return err }
}

func (e *env) run(s step) {
	t := e.t
	t.Helper()
	where := fmt.Sprintf("%s:%d: %s", s.file, s.line, s.cmd)
	if strings.TrimSpace(stripComment(s.cmd)) == "kill %?watch" {
		for _, b := range e.bg {
			if strings.Contains(strings.Join(b.cmd.Args, " "), " watch") {
				stop(t, b)
			}
		}
		return
	}
	if bgCmd, ok := strings.CutSuffix(strings.TrimSpace(stripComment(s.cmd)), "&"); ok {
		b := e.start(strings.TrimSpace(bgCmd))
		from := 0
		for _, w := range s.expect {
			if !w.fromWatch {
				t.Fatalf("%s: a background command's lines must be marked (from watch)", where)
			}
			from = waitLine(t, b, from, w.re, where)
		}
		return
	}
	wantFail := false
	for _, w := range s.expect {
		if !w.fromWatch && strings.HasPrefix(w.text, "ERROR ") {
			wantFail = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	ro, model := reader(s.cmd)
	var next func() error
	if ro {
		next = e.watch(ctx, model)
	}
	watchFrom := map[*background]int{}
	for _, b := range e.bg {
		out, _ := b.lines()
		watchFrom[b] = len(out)
	}
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), commandTimeout)
		cmd := e.command(cctx, s.cmd)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		ccancel()
		lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		failed := err != nil
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || (ee.ExitCode() != 1 && ee.ExitCode() != 2)) {
			t.Fatalf("%s: %v\n%s", where, err, out.String())
		}
		if matches(lines, s.expect) && failed == wantFail {
			break
		}
		if !ro {
			t.Fatalf("%s: exit error %v (want failure: %v); it printed:\n%s\nthe walk-through shows:\n%s", where, err, wantFail, out.String(), shown(s.expect))
		}
		if err := next(); err != nil {
			t.Fatalf("%s: not as the walk-through shows within %v (%v); last output:\n%s\nit shows:\n%s", where, agentTimeout, err, out.String(), shown(s.expect))
		}
	}
	// Lines the background watch prints because of this command.
	for _, w := range s.expect {
		if !w.fromWatch {
			continue
		}
		var watcher *background
		for _, b := range e.bg {
			if strings.Contains(strings.Join(b.cmd.Args, " "), " watch") {
				watcher = b
			}
		}
		if watcher == nil {
			t.Fatalf("%s: a (from watch) line but no watch runs", where)
		}
		watchFrom[watcher] = waitLine(t, watcher, watchFrom[watcher], w.re, where)
	}
}

func stripComment(cmd string) string {
	if i := strings.Index(cmd, " #"); i >= 0 {
		return cmd[:i]
	}
	return cmd
}

func shown(es []expect) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("# " + e.text + "\n")
	}
	return b.String()
}

// TestReadmeWalkthrough runs README.md's quick start daemon and its short
// walk-through (a machine and a pod), and checks what each command prints.
func TestReadmeWalkthrough(t *testing.T) {
	runWalkthrough(t, "README.md", "A first machine and a first pod")
}

// TestProvisionctlWalkthrough runs README.md's quick start daemon and the
// longer walk-through of docs/provisionctl.md on it.
func TestProvisionctlWalkthrough(t *testing.T) {
	runWalkthrough(t, "docs/provisionctl.md", "Walk-through")
}

// runWalkthrough starts the daemon as README.md's quick start does, on a
// fresh data dir, and runs the commands of file's section heading on it.
func runWalkthrough(t *testing.T, file, heading string) {
	if testing.Short() {
		t.Skip("builds the binaries and runs the whole walk-through")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	quick := parseBlocks(t, "README.md", readme, "Quick start")
	text := readme
	if file != "README.md" {
		if text, err = os.ReadFile(filepath.Join("../..", file)); err != nil {
			t.Fatal(err)
		}
	}
	walk := parseBlocks(t, file, text, heading)

	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin")+"/", "./cmd/provisiond", "./cmd/provisionctl")
	build.Dir, build.Stderr = "../..", os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(examples, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	e := &env{t: t, dir: dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROVISIOND_") && !strings.HasPrefix(kv, "XDG_") && !strings.HasPrefix(kv, "HOME=") {
			e.vars = append(e.vars, kv)
		}
	}
	// The daemon listens on a free port (credentials.yaml says which) and
	// logs in JSON, so that the test sees when it serves.
	e.vars = append(e.vars, "HOME="+home, "PROVISIOND_ADDR=127.0.0.1:0", "PROVISIOND_LOG_FORMAT=json")

	var serving bool
	for _, s := range quick {
		switch {
		case strings.HasPrefix(s.cmd, "make build"):
		case strings.HasPrefix(s.cmd, "bin/provisiond serve"):
			d := e.start(stripComment(s.cmd))
			re := regexp.MustCompile(`"msg":"serving"`)
			waitLine(t, d, 0, re, "the quick start's daemon")
			serving = true
		default:
			t.Fatalf("%s:%d: the test does not know how to run %q from the quick start", s.file, s.line, s.cmd)
		}
	}
	if !serving {
		t.Fatal("the quick start starts no daemon")
	}
	creds, err := credentials.Read(filepath.Join(home, ".local", "share", "provisiond", credentials.File))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	e.api, err = client.Dial(ctx, client.Config{Addr: creds.APIAddresses[0], CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.api.Close()
	if _, err := e.api.LoginUser(ctx, creds.AdminUser, creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	for _, s := range walk {
		e.run(s)
	}
}

// The notation itself.
func TestPatterns(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"controller  iaas  alive  0b1c...", "controller  iaas  alive  24d19d4b-f9fc-4377-b671-55e869aa1ea2", true},
		{"controller  iaas  alive  0b1c...", "controller  iaas  dying  24d19d4b-f9fc", false},
		{`{"name":"edge","uuid":"5a1c...","type":"iaas"}`, `{"name":"edge","uuid":"a5835f04-af84","type":"iaas"}`, true},
		{"0/lxd/0  alive  started  i-0-lxd-0  running  -  10.0.0...", "0/lxd/0  alive  started  i-0-lxd-0    running   -             10.0.0.62", true},
		{"10.0.0...  10.0.0.0/24  0/lxd/0  allocated  00:16:3e:...", "10.0.0.62  10.0.0.0/24  0/lxd/0  allocated  00:16:3e:7c:87:24", true},
		{"10.0.0...  10.0.0.0/24", "10.1.0.62  10.0.0.0/24", false},
		{"2026-01-02T15:04:05Z  model  3f6d...", "2026-12-01T11:36:29Z  model       23a9f77a-1eaf", true},
		{"a  ...", "a b c d", true},
		{"i-0", "i-01", false},
	} {
		if got := pattern(tc.want).MatchString(tc.got); got != tc.ok {
			t.Errorf("pattern(%q) on %q = %v; want %v (%s)", tc.want, tc.got, got, tc.ok, pattern(tc.want))
		}
	}
	out := []string{"MODEL  TYPE", "", "a", "b", "c"}
	if !matches(out, []expect{{re: pattern("MODEL  TYPE")}, {re: nil}, {re: pattern("c")}}) {
		t.Error(`"..." line should match any lines`)
	}
	if matches(out, []expect{{re: pattern("MODEL  TYPE")}, {re: pattern("a")}}) {
		t.Error("unlisted lines must fail the match")
	}
}
