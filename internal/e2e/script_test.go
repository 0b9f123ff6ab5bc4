package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// TestClusterScript runs scripts/etcd-cluster.sh as an operator trying
// scale-out would (with the binaries TestMain built): it starts a
// three-member etcd and three daemons and says where they are; a client
// logs in through each daemon, which lists the three; provisionctl
// version and show-controller, as the script's hint runs provisionctl,
// answer with the etcd store's figures; a daemon killed
// with SIGKILL is reported and the others serve on; etcdcluster stops the
// etcd leader and starts it again on SIGUSR1 and SIGUSR2 while writes go
// through; SIGINT (Ctrl-C)
// stops every process the script started, and it exits 0.
func TestClusterScript(t *testing.T) {
	t.Parallel()
	bins := filepath.Dir(bin(t, "provisiond"))
	dir := filepath.Join(t.TempDir(), "cluster")
	cmd := exec.Command("bash", "../../scripts/etcd-cluster.sh", "--dir", dir, "--port", "0")
	cmd.Env = append(cmd.Environ(), "PROVISIOND_BIN_DIR="+bins)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	begun := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exit := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exit <- cmd.Wait()
	}()

	// What the script prints: etcd's pid, each daemon's address and pid.
	etcdLine := regexp.MustCompile(`^ +\(etcdcluster pid (\d+):`)
	daemonLine := regexp.MustCompile(`^daemon: +(d\d) at (\S+) \(pid (\d+), data dir (\S+),`)
	type started struct{ name, addr, dataDir string }
	var pids []int
	var ds []started
	t.Cleanup(func() { // the script's children are in process groups of their own
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	timeout := time.After(2 * startTimeout)
ready:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the script ended before it was ready: %v\nstderr:\n%s", <-exit, stderr.String())
			}
			t.Log(line)
			if m := etcdLine.FindStringSubmatch(line); m != nil {
				pid, _ := strconv.Atoi(m[1])
				pids = append(pids, pid)
			}
			if m := daemonLine.FindStringSubmatch(line); m != nil {
				pid, _ := strconv.Atoi(m[3])
				pids = append(pids, pid)
				ds = append(ds, started{m[1], m[2], m[4]})
			}
			if len(line) > 6 && line[:6] == "ready:" {
				break ready
			}
		case <-timeout:
			t.Fatalf("the script was not ready within %s\nstderr:\n%s", 2*startTimeout, stderr.String())
		}
	}
	t.Logf("ready %s after the start", time.Since(begun).Round(time.Millisecond))
	go func() {
		for range lines {
		}
	}()
	if len(ds) != 3 || len(pids) != 4 {
		t.Fatalf("the script named daemons %v and pids %v; want three daemons and etcd", ds, pids)
	}

	// A client logs in through each daemon with that daemon's
	// credentials.yaml, and is told of the three.
	var addrs []string
	for _, d := range ds {
		addrs = append(addrs, d.addr)
	}
	slices.Sort(addrs)
	for _, d := range ds {
		creds := (&daemonProc{dataDir: d.dataDir}).credentials(t)
		conn := mustDial(t, creds, d.addr, false, "")
		if got := sorted(hostPorts(conn.LoginResult().Servers)); !slices.Equal(got, addrs) {
			t.Errorf("login at %s (%s) lists %v; want %v", d.name, d.addr, got, addrs)
		}
		if _, err := client.NewModelAdmin(conn).ListModels(t.Context()); err != nil {
			t.Errorf("ListModels at %s: %v", d.name, err)
		}
	}

	// provisionctl version and show-controller through a daemon of the
	// cluster: the server's build, and the store as etcd's (its three
	// members up, as the daemon's member watch hears them).
	ctl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin(t, "provisionctl"),
			append([]string{"--credentials", filepath.Join(ds[0].dataDir, "credentials.yaml")}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("provisionctl %v: %v\n%s", args, err, out)
		}
		t.Logf("provisionctl %v:\n%s", args, out)
		return string(out)
	}
	if out := ctl("version"); !regexp.MustCompile(`(?m)^server: provisiond .*, Juju API .*, at `).MatchString(out) {
		t.Errorf("provisionctl version printed no server line:\n%s", out)
	}
	storeLine := regexp.MustCompile(`(?m)^store +etcd, revision \d+, .*, 3 of 3 members up$`)
	waitFor(t, "show-controller to show etcd's three members up", func() bool {
		return storeLine.MatchString(ctl("show-controller"))
	})

	// SIGKILL of d1: the script says so and carries on.
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the script to report d1's exit", func() bool {
		return bytes.Contains(stderr.Bytes(), []byte("d1 (pid "+strconv.Itoa(pids[1])+") exited"))
	})
	creds := (&daemonProc{dataDir: ds[1].dataDir}).credentials(t)
	admin := mustDial(t, creds, ds[1].addr, false, "")

	// SIGUSR1 to etcdcluster stops the etcd leader, SIGUSR2 starts it
	// again; writes go through meanwhile.
	etcdLog := filepath.Join(dir, "etcd", "etcd.log")
	for _, step := range []struct {
		sig  syscall.Signal
		says string
	}{{syscall.SIGUSR1, "etcd: stopped the leader"}, {syscall.SIGUSR2, "etcd: started member"}} {
		if err := syscall.Kill(pids[0], step.sig); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "etcdcluster to say "+step.says, func() bool {
			b, _ := os.ReadFile(etcdLog)
			return bytes.Contains(b, []byte(step.says))
		})
		// A write in flight when the leader stops may be answered
		// `try again` (etcd dropped or cannot confirm it); a client
		// retries, as Juju's agents retry a failed call.
		waitFor(t, "a machine added while "+step.says, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
			defer cancel()
			res, err := client.NewModelAdmin(admin).AddMachines(ctx, params.AddMachinesArgs{Count: 1})
			if errors.Is(err, client.ErrTryAgain) {
				t.Logf("AddMachines while %s: %v; retrying", step.says, err)
				return false
			}
			if err != nil || len(res.Machines) != 1 {
				t.Fatalf("AddMachines while %s: %v, %v", step.says, res.Machines, err)
			}
			return true
		})
	}

	// Ctrl-C stops everything, and the script exits 0.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	interrupted := time.Now()
	select {
	case err := <-exit:
		if err != nil {
			t.Fatalf("the script exited with %v after SIGINT\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(stopTimeout):
		t.Fatalf("the script did not exit within %s of SIGINT\nstderr:\n%s", stopTimeout, stderr.String())
	}
	t.Logf("stopped %s after SIGINT", time.Since(interrupted).Round(time.Millisecond))
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still there after the script exited (kill -0: %v)", pid, err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer goroutine and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}

func (b *syncBuffer) String() string { return string(b.Bytes()) }
