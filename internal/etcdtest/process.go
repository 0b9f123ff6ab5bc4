package etcdtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// MemberFlag is the flag of a program that runs one member of a
// Processes cluster: "PROGRAM --member SPEC", SPEC the member's MemberSpec
// as JSON. The program calls MemberMain.
const MemberFlag = "--member"

// MemberMain runs this process as one member of a Processes cluster when
// args (the command line after the program's name) are MemberFlag and a
// spec: until SIGINT or SIGTERM, logging etcd's errors to stderr. It
// returns the exit status, and false (doing nothing) for other args. A
// program StartProcesses runs calls it first (cmd/etcdcluster, and test
// binaries that start their members from themselves).
func MemberMain(args []string, stderr io.Writer) (int, bool) {
	if len(args) != 2 || args[0] != MemberFlag {
		return 0, false
	}
	var spec MemberSpec
	if err := json.Unmarshal([]byte(args[1]), &spec); err != nil {
		fmt.Fprintln(stderr, "etcdtest: member spec:", err)
		return 2, true
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := RunMember(ctx, spec, ErrorLogger(stderr)); err != nil {
		fmt.Fprintln(stderr, "etcdtest:", err)
		return 1, true
	}
	return 0, true
}

// readyLine is what a member process prints on its standard output once
// it serves.
const readyLine = "etcdtest: member ready"

// RunMember runs the member spec describes in this process until ctx ends
// or etcd fails, logging to lg; once it serves, it prints a line on
// standard output for StartProcesses. It is the member mode of
// cmd/etcdcluster.
func RunMember(ctx context.Context, spec MemberSpec, lg *zap.Logger) error {
	e, err := startEmbed(memberConfig(spec, lg))
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Println(readyLine)
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}

// Processes is an etcd cluster whose members each run in a process of
// their own: a test can then stop one with SIGSTOP, as a hung machine, a
// stalled disk or a paused VM leaves a member (its sockets open, nothing
// answered), which members in the test's own process cannot be. Each
// member is a run of a program given MemberFlag (cmd/etcdcluster); its
// log (errors) is the file Log names. A member process dies with the
// process that started it (Linux: the parent-death signal).
//
// A Processes is safe for concurrent use.
type Processes struct {
	bin     string
	opts    Options
	members []*Process
	mu      sync.Mutex // serialises Kill, Restart and Close
}

// Process is one member of a Processes cluster.
type Process struct {
	MemberSpec
	Log string // its standard error

	mu   sync.Mutex
	cmd  *exec.Cmd     // nil while not running
	done chan struct{} // closed once cmd has been reaped
}

// StartProcesses starts a cluster of opts.Members members, each in a
// process of bin, and waits until every member is ready. Ports are picked
// as Start picks them.
func StartProcesses(bin string, opts Options) (*Processes, error) {
	if opts.Dir == "" {
		return nil, errors.New("etcdtest: Options.Dir is required")
	}
	opts.Members = max(opts.Members, 1)
	if opts.MaxTxnOps == 0 {
		opts.MaxTxnOps = MaxTxnOps
	}
	if opts.MaxRequestBytes == 0 {
		opts.MaxRequestBytes = MaxRequestBytes
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var c *Processes
		if c, err = startProcesses(bin, opts, attempt); err == nil {
			return c, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}

func startProcesses(bin string, opts Options, attempt int) (*Processes, error) {
	specs, err := layout(opts, attempt)
	if err != nil {
		return nil, err
	}
	c := &Processes{bin: bin, opts: opts}
	for _, spec := range specs {
		c.members = append(c.members, &Process{MemberSpec: spec, Log: spec.Dir + ".log"})
	}
	// Members of a cluster must start together: each waits for a quorum.
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { errs[i] = m.start(bin) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// start runs the member's process and waits for it to serve.
func (m *Process) start(bin string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return nil
	}
	spec, err := json.Marshal(m.MemberSpec)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(m.Log), 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(m.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, MemberFlag, string(spec))
	cmd.Stderr = logf
	cmd.SysProcAttr = memberProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: start %s: %w", m.Name, err)
	}
	done := make(chan struct{})
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == readyLine {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-ready:
		m.cmd, m.done = cmd, done
		return nil
	case <-done:
		return fmt.Errorf("etcdtest: member %s exited before it was ready (%s): %s", m.Name, cmd.ProcessState, tail(m.Log))
	case <-time.After(readyTimeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("etcdtest: member %s not ready after %s: %s", m.Name, readyTimeout, tail(m.Log))
	}
}

// tail is the end of a log file, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// signal sends sig to the member's process, if it runs.
func (m *Process) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return fmt.Errorf("etcdtest: member %s is not running", m.Name)
	}
	return m.cmd.Process.Signal(sig)
}

// kill kills the member's process (stopped or not) and reaps it.
func (m *Process) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	m.cmd, m.done = nil, nil
	m.Existing = true // a restart joins the cluster from the data dir
}

// Pid is the member's process id (0 while it is not running).
func (m *Process) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Members returns the members, in the order of their names (m0, m1, ...).
func (c *Processes) Members() []*Process { return c.members }

// Endpoints returns every member's client URL.
func (c *Processes) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.ClientURL
	}
	return eps
}

// MaxTxnOps and MaxRequestBytes return the limits the members run with.
func (c *Processes) MaxTxnOps() int       { return int(c.opts.MaxTxnOps) }
func (c *Processes) MaxRequestBytes() int { return int(c.opts.MaxRequestBytes) }

// Pause stops member i with SIGSTOP: its process holds its sockets and
// answers nothing, to its clients and to its peers, until Resume. It
// returns once the kernel shows the process stopped: a signal is
// delivered when the process is next scheduled, and on a busy box a
// request sent right after kill(2) can still be answered.
func (c *Processes) Pause(i int) error {
	m := c.members[i]
	if err := m.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(m.Pid(), 10*time.Second)
}

// waitStopped waits until /proc says process pid is stopped (state T),
// for at most d. Without /proc it returns at once.
func waitStopped(pid int, d time.Duration) error {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(d)
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // no /proc: the signal is all there is
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		if j := strings.LastIndexByte(string(b), ')'); j >= 0 && j+2 < len(b) && (b[j+2] == 'T' || b[j+2] == 't') {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdtest: process %d not stopped %s after SIGSTOP", pid, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues member i after Pause (SIGCONT).
func (c *Processes) Resume(i int) error { return c.members[i].signal(syscall.SIGCONT) }

// Stop kills member i with SIGKILL, as a crash would, and reaps it.
func (c *Processes) Stop(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[i].kill()
}

// Running reports whether member i's process runs (paused or not).
func (c *Processes) Running(i int) bool { return c.members[i].Pid() != 0 }

// Restart starts a stopped member again, on its ports and data dir, and
// waits until it is ready (which needs a quorum).
func (c *Processes) Restart(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].start(c.bin)
}

// Leader returns the index of the member that leads, as the members that
// answer within a second say, waiting up to ctx for one to be elected. A
// paused member answers nothing and is never found leading.
func (c *Processes) Leader(ctx context.Context) (int, error) {
	cli, err := c.client()
	if err != nil {
		return -1, err
	}
	defer cli.Close()
	for {
		for i, m := range c.members {
			if m.Pid() == 0 {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cli.Status(sctx, m.ClientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i, nil
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdtest: no leader: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close kills every member and waits for them. It is idempotent. The data
// directories and logs are left for the caller.
func (c *Processes) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		m.kill()
	}
}

// NewProcesses starts a cluster of n member processes of bin in
// tb.TempDir() without fsync, and kills them when the test ends (printing
// their logs' ends if it failed).
func NewProcesses(tb testing.TB, bin string, n int) *Processes {
	tb.Helper()
	c, err := StartProcesses(bin, Options{Dir: tb.TempDir(), Members: n, NoFsync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		if tb.Failed() {
			for _, m := range c.members {
				tb.Logf("etcd member %s log (tail):\n%s", m.Name, tail(m.Log))
			}
		}
	})
	return c
}
