// Package daemonproc runs the built provisiond binary as a process of
// its own, for the harnesses that kill, stop and restart it
// (internal/crashtest, internal/robustness): it reads the daemon's JSON
// log for the "serving" line and keeps the log's tail for reports.
package daemonproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logTailLines is how many daemon log lines a process keeps for reports.
const logTailLines = 40

// Process is one run of the daemon binary.
type Process struct {
	cmd   *exec.Cmd
	ready chan string // the listen address, from the "serving" log line
	exit  chan error  // cmd.Wait's result, once stderr is drained

	mu   sync.Mutex
	tail []string
}

// Start runs `bin serve` on dataDir and a free loopback port, with
// more flags args.
func Start(bin, dataDir string, env []string, args ...string) (*Process, error) {
	return StartIn(nil, bin, dataDir, env, args...)
}

// StartIn is Start through the command wrap, which must exec what follows
// it (e.g. "ip netns exec NS": the process is then the daemon's own).
func StartIn(wrap []string, bin, dataDir string, env []string, args ...string) (*Process, error) {
	argv := slices.Concat(wrap, []string{bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir,
		"--log-format", "json", "--log-level", "info"}, args)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = procAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Process{cmd: cmd, ready: make(chan string, 1), exit: make(chan error, 1)}
	go p.read(stderr)
	return p, nil
}

// read scans the daemon's log until it closes, then reaps the process.
func (p *Process) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	served := false
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > logTailLines {
			p.tail = p.tail[len(p.tail)-logTailLines:]
		}
		p.mu.Unlock()
		if served {
			continue
		}
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
			served = true
			p.ready <- rec.Addr
		}
	}
	_, _ = io.Copy(io.Discard, r)
	p.exit <- p.cmd.Wait()
}

// WaitServing waits for the "serving" line and returns the address.
func (p *Process) WaitServing(ctx context.Context) (string, error) {
	select {
	case addr := <-p.ready:
		return addr, nil
	case err := <-p.exit:
		p.exit <- err
		return "", fmt.Errorf("daemon exited before serving (%v); log:\n%s", err, p.LogTail())
	case <-ctx.Done():
		return "", fmt.Errorf("daemon did not start serving: %w; log:\n%s", ctx.Err(), p.LogTail())
	}
}

// Kill sends SIGKILL and waits (bounded) until the process is reaped, so
// its file lock is released.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return p.wait(30 * time.Second)
}

// Stop sends SIGTERM and waits for a clean exit.
func (p *Process) Stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.exit:
		p.exit <- err
		if err != nil {
			return fmt.Errorf("daemon exit after SIGTERM: %v; log:\n%s", err, p.LogTail())
		}
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("daemon did not exit within 30s of SIGTERM")
	}
}

func (p *Process) wait(d time.Duration) error {
	select {
	case err := <-p.exit:
		p.exit <- err
		return nil
	case <-time.After(d):
		return fmt.Errorf("daemon (pid %d) not reaped %s after SIGKILL", p.cmd.Process.Pid, d)
	}
}

// Exited reports whether the process has been reaped.
func (p *Process) Exited() bool {
	select {
	case err := <-p.exit:
		p.exit <- err
		return true
	default:
		return false
	}
}

func (p *Process) LogTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume it).
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Build builds the commands pkgs (import paths) with go build, with the
// build tags tags (none if ""), into dir. It is built without the race
// detector: a daemon under test is killed and restarted; its races are
// the in-process tests' business.
func Build(dir, tags string, pkgs ...string) error {
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command("go", append(args, pkgs...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// RunTests is the TestMain of a package whose tests run built binaries:
// unless -short, it builds pkgs (with tags) into a temporary directory,
// sets *dir to it, runs the tests, removes it and exits with their
// status. With -short *dir stays "" and the tests are to skip.
func RunTests(m *testing.M, dir *string, tags string, pkgs ...string) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	d, err := os.MkdirTemp("", "provisiond-bin-")
	if err == nil {
		err = Build(d, tags, pkgs...)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(d)
		os.Exit(1)
	}
	*dir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
