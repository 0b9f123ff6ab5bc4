package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
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

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/rpc/client"
)

// daemonBin is the provisiond binary built by TestMain ("" with -short).
var daemonBin string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// The test binary stands in for provisiond as check's child
		// (dbcheck.go) when a test runs check in this process.
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	flag.Parse()
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "provisiond-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		daemonBin = filepath.Join(dir, "provisiond")
		cmd := exec.Command("go", "build", "-o", daemonBin, ".")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "go build:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// buildDaemon returns the binary TestMain built, or skips with -short.
func buildDaemon(t *testing.T) string {
	t.Helper()
	if daemonBin == "" {
		t.Skip("builds the binary")
	}
	return daemonBin
}

type proc struct {
	cmd  *exec.Cmd
	addr string
	exit chan error

	mu     sync.Mutex
	stderr strings.Builder // everything the daemon wrote to stderr
}

// log returns what the daemon wrote to stderr so far.
func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// startDaemon runs the binary (serve, with extra flags) and waits for its
// "serving" log line.
func startDaemon(t *testing.T, bin, dataDir string, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--log-format", "json"}, extra...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exit: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.Write(sc.Bytes())
			p.stderr.WriteByte('\n')
			p.mu.Unlock()
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				ready <- line.Addr
			}
			if testing.Verbose() {
				t.Logf("daemon: %s", sc.Text())
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	select {
	case p.addr = <-ready:
	case err := <-p.exit:
		t.Fatalf("daemon exited before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not start serving")
	}
	return p
}

func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exit:
		if err != nil {
			t.Fatalf("daemon exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not exit within 20s of SIGTERM")
	}
}

func loginBoth(t *testing.T, creds *daemon.Credentials, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := client.Dial(ctx, client.Config{Addr: addr, ModelUUID: creds.DefaultModelUUID, CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.LoginUser(ctx, creds.AdminUser, creds.AdminPassword); err != nil {
		t.Fatalf("admin login: %v", err)
	}
	if err := admin.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	agent, err := client.Dial(ctx, client.Config{Addr: addr, ModelUUID: creds.ControllerModelUUID, CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	a := creds.ControllerAgent
	if _, err := agent.LoginAgent(ctx, a.Tag, a.Password, a.Nonce); err != nil {
		t.Fatalf("controller agent login: %v", err)
	}
	if err := agent.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// The built binary end to end: first start, credentials.yaml, logins,
// SIGTERM, restart with the same data dir, logins again.
func TestBinaryEndToEnd(t *testing.T) {
	bin := buildDaemon(t)
	dataDir := filepath.Join(t.TempDir(), "data")

	p := startDaemon(t, bin, dataDir)
	credsPath := filepath.Join(dataDir, daemon.CredentialsFile)
	info, err := os.Stat(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("credentials.yaml mode = %v; want 0600", info.Mode().Perm())
	}
	creds, err := daemon.ReadCredentials(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(creds.APIAddresses) != 1 || creds.APIAddresses[0] != p.addr {
		t.Fatalf("api-addresses = %v; want [%s]", creds.APIAddresses, p.addr)
	}
	if creds.AdminUser != "admin" || creds.ControllerAgent.Tag != "machine-0" || creds.ControllerAgent.Nonce == "" {
		t.Fatalf("credentials = %+v", creds)
	}
	loginBoth(t, creds, p.addr)
	p.stop(t)

	p = startDaemon(t, bin, dataDir)
	again, err := daemon.ReadCredentials(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	if again.AdminPassword != creds.AdminPassword || again.ControllerUUID != creds.ControllerUUID || again.CACert != creds.CACert {
		t.Fatal("restart changed the credentials")
	}
	loginBoth(t, again, p.addr)

	// Backup of the running daemon, restore into a fresh data dir, start
	// there: the same controller and logins.
	archive := filepath.Join(t.TempDir(), "backup.tar")
	if out, err := exec.Command(bin, "backup", "--data-dir", dataDir, "--output", archive).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "restore", archive, "--data-dir", dataDir).CombinedOutput(); err == nil {
		t.Fatalf("restore over the live data dir succeeded:\n%s", out)
	}
	p.stop(t)
	restored := filepath.Join(t.TempDir(), "restored")
	if out, err := exec.Command(bin, "restore", archive, "--data-dir", restored).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	p = startDaemon(t, bin, restored)
	back, err := daemon.ReadCredentials(filepath.Join(restored, daemon.CredentialsFile))
	if err != nil {
		t.Fatal(err)
	}
	if back.ControllerUUID != creds.ControllerUUID || back.AdminPassword != creds.AdminPassword {
		t.Fatal("restored daemon has other credentials")
	}
	loginBoth(t, back, p.addr)
	p.stop(t)
}

func TestVersionAndUsage(t *testing.T) {
	var out, errOut bytesBuffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 || out.String() == "" {
		t.Fatalf("version: %d %q", code, out.String())
	}
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command exit = %d", code)
	}
	if code := run([]string{"serve", "--addr"}, &out, &errOut); code != 2 {
		t.Fatalf("bad flag exit = %d", code)
	}
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *bytesBuffer) String() string              { return string(w.b) }
