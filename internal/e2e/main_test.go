package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/daemonproc"
)

// binDir holds the binaries TestMain built ("" with -short).
var binDir string

// The binaries are built without the race detector: the daemons are the
// system under test, killed and restarted; their races are the in-process
// tests' business (internal/daemon). This test process runs with -race.
func TestMain(m *testing.M) {
	daemonproc.RunTests(m, &binDir, "", "github.com/provisiond/provisiond/cmd/provisiond",
		"github.com/provisiond/provisiond/cmd/provisionctl", "github.com/provisiond/provisiond/cmd/etcdcluster")
}

// bin returns the path of a built binary, or skips the test with -short.
func bin(t *testing.T, name string) string {
	t.Helper()
	if binDir == "" {
		t.Skip("builds and runs the binaries")
	}
	return filepath.Join(binDir, name)
}

// Timeouts of the tests' bounded waits.
const (
	startTimeout = 60 * time.Second // a daemon's "serving" line
	stopTimeout  = 30 * time.Second // exit after SIGTERM, reaping after SIGKILL
	callTimeout  = 30 * time.Second // one API call or dial
	waitTimeout  = 60 * time.Second // a condition waitFor polls
)

// leaseTTL is the daemons' --etcd-lease-ttl: how long a killed daemon
// stays listed among the API servers.
const leaseTTL = 2 * time.Second

// daemonProc is one provisiond serve process of a controller on etcd.
type daemonProc struct {
	name    string
	dataDir string
	addr    string // host:port it serves on
	cmd     *exec.Cmd
	exit    chan error  // cmd.Wait's result once its log is drained
	ready   chan string // the "serving" line's address

	mu   sync.Mutex
	tail []string // the last lines of its log
}

// startDaemon runs `provisiond serve --store etcd` on endpoints and
// prefix, in a data dir of its own, and waits for it to serve. extra are
// more flags. The daemon is killed when the test ends, if still running;
// its log tail is printed if the test failed.
func startDaemon(t *testing.T, name string, endpoints []string, prefix string, extra ...string) *daemonProc {
	t.Helper()
	p := spawnDaemon(t, name, endpoints, prefix, extra...)
	if err := p.waitServing(); err != nil {
		t.Fatal(err)
	}
	return p
}

// spawnDaemon starts the daemon as startDaemon does without waiting for
// it (waitServing does; it may run on another goroutine).
func spawnDaemon(t *testing.T, name string, endpoints []string, prefix string, extra ...string) *daemonProc {
	t.Helper()
	return spawnServe(t, name, append([]string{
		"--store", "etcd", "--etcd-endpoints", strings.Join(endpoints, ","), "--etcd-prefix", prefix,
		"--etcd-lease-ttl", leaseTTL.String(), "--etcd-request-timeout", "2s",
		"--etcd-max-txn-ops", "1024", "--etcd-max-request-bytes", "8388608"}, extra...)...)
}

// startBoltDaemon runs `provisiond serve` on its embedded default store
// (bbolt) in a data dir of its own, with more flags extra, and waits for
// it to serve.
func startBoltDaemon(t *testing.T, name string, extra ...string) *daemonProc {
	t.Helper()
	p := spawnServe(t, name, extra...)
	if err := p.waitServing(); err != nil {
		t.Fatal(err)
	}
	return p
}

// spawnServe starts `provisiond serve` on a free loopback port in a data
// dir of its own, logging JSON at info, with more flags extra.
func spawnServe(t *testing.T, name string, extra ...string) *daemonProc {
	t.Helper()
	p := &daemonProc{name: name, dataDir: filepath.Join(t.TempDir(), name), exit: make(chan error, 1), ready: make(chan string, 1)}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", p.dataDir,
		"--log-format", "json", "--log-level", "info"}, extra...)
	p.cmd = exec.Command(bin(t, "provisiond"), args...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stderr, p.ready)
	t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exit
		}
		if t.Failed() {
			t.Logf("daemon %s log (tail):\n%s", p.name, p.logTail())
		}
	})
	return p
}

// waitServing waits for the daemon's "serving" line and records its
// address.
func (p *daemonProc) waitServing() error {
	select {
	case p.addr = <-p.ready:
		return nil
	case err := <-p.exit:
		p.exit <- err
		return fmt.Errorf("daemon %s exited before serving: %v\n%s", p.name, err, p.logTail())
	case <-time.After(startTimeout):
		return fmt.Errorf("daemon %s did not serve within %s\n%s", p.name, startTimeout, p.logTail())
	}
}

// read keeps the log's tail and reports the "serving" line's address.
func (p *daemonProc) read(r io.Reader, ready chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	served := false
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.tail = append(p.tail, line)
		if len(p.tail) > 60 {
			p.tail = p.tail[len(p.tail)-60:]
		}
		p.mu.Unlock()
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if !served && json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "serving" {
			served = true
			ready <- rec.Addr
		}
	}
	_, _ = io.Copy(io.Discard, r)
	p.exit <- p.cmd.Wait()
}

func (p *daemonProc) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// lastLogged finds the last line of the log's tail whose message is msg:
// its addr field (empty when it has none), and whether there is one.
func (p *daemonProc) lastLogged(msg string) (addr string, found bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range p.tail {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg {
			addr, found = rec.Addr, true
		}
	}
	return addr, found
}

// loggedAddr returns the addr field of the last line of the log's tail
// whose message is msg ("" if none).
func (p *daemonProc) loggedAddr(msg string) string {
	addr, _ := p.lastLogged(msg)
	return addr
}

// logged reports whether a line of the log's tail has msg as its message.
func (p *daemonProc) logged(msg string) bool {
	_, found := p.lastLogged(msg)
	return found
}

func (p *daemonProc) exited() bool {
	select {
	case err := <-p.exit:
		p.exit <- err
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is reaped.
func (p *daemonProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	select {
	case err := <-p.exit:
		p.exit <- err
	case <-time.After(stopTimeout):
		t.Fatalf("daemon %s not reaped %s after SIGKILL", p.name, stopTimeout)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *daemonProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exit:
		p.exit <- err
		if err != nil {
			t.Fatalf("daemon %s exit after SIGTERM: %v\n%s", p.name, err, p.logTail())
		}
	case <-time.After(stopTimeout):
		t.Fatalf("daemon %s did not exit within %s of SIGTERM", p.name, stopTimeout)
	}
}

// credentials reads the credentials.yaml the daemon wrote.
func (p *daemonProc) credentials(t *testing.T) *credentials.Credentials {
	t.Helper()
	c, err := credentials.Read(filepath.Join(p.dataDir, credentials.File))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond every 20ms until it holds, failing t after
// waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
