package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--nope"}, 2, "unknown flag: --nope"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--cloud", "aws"}, 2, `--cloud "aws": the only cloud is sim`},
		{[]string{"--log-level", "loud"}, 2, `--log-level "loud"`},
		{[]string{"--credentials", filepath.Join(t.TempDir(), "none.yaml")}, 1, "no credentials file"},
	} {
		var out, errb bytes.Buffer
		code := run(t.Context(), tc.args, &out, &errb, func(string) string { return "" })
		if code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
	// The daemon's default data dir, as provisionctl finds it.
	var errb bytes.Buffer
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	if code := run(t.Context(), nil, &bytes.Buffer{}, &errb, func(k string) string { return env[k] }); code != 1 ||
		!strings.Contains(errb.String(), filepath.Join(home, ".local", "share", "provisiond", "credentials.yaml")) {
		t.Errorf("default path: exit %d, %q", code, errb.String())
	}
}

// The built binary provisions a machine on a running daemon and stops
// cleanly on SIGTERM.
func TestBinaryProvisionsAndStops(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "provisionagent")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	dir := t.TempDir()
	cfg := daemon.Default(dir)
	cfg.Addr = "127.0.0.1:0"
	d, err := daemon.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})

	cmd := exec.Command(bin, "--log-format", "json")
	cmd.Env = append(os.Environ(), "PROVISIOND_CREDENTIALS="+filepath.Join(dir, "credentials.yaml"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	msgs := make(chan string, 100)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg string }
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				select {
				case msgs <- line.Msg:
				default:
				}
			}
			if testing.Verbose() {
				t.Logf("agent: %s", sc.Text())
			}
		}
		exited <- cmd.Wait()
	}()

	creds := d.Credentials()
	c, err := client.Dial(t.Context(), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginUser(t.Context(), "admin", creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	var wr params.StringsWatchResult
	if err := c.Call(t.Context(), "ModelAdmin", 1, "", "WatchModel", params.ModelArgs{}, &wr); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(t.Context(), "ModelAdmin", 1, "", "AddMachines", params.AddMachinesArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	w := client.NewStringsWatcher(c, wr.StringsWatcherId)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		var s params.ModelStatus
		if err := c.Call(ctx, "ModelAdmin", 1, "", "Status", params.ModelArgs{}, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Machines) == 1 && s.Machines[0].AgentStatus.Status == "started" {
			break
		}
		if _, err := w.Next(ctx); err != nil {
			t.Fatalf("machine 0 not started: %v", err)
		}
	}

	// The agent logs "machine agent started" once the answer to its
	// SetStatus arrives, which may be after Status shows it: wait for
	// the line before stopping the agent.
	var seen []string
	for !slices.Contains(seen, "machine agent started") {
		select {
		case m := <-msgs:
			seen = append(seen, m)
		case <-ctx.Done():
			t.Fatalf("no \"machine agent started\" in the log: %q", seen)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("agent exited: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not stop on SIGTERM")
	}
	for len(msgs) > 0 {
		seen = append(seen, <-msgs)
	}
	for _, want := range []string{"agent starting", "machine started", "machine agent started", "agent stopped"} {
		if !strings.Contains(strings.Join(seen, "\n"), want) {
			t.Errorf("log lacks %q: %q", want, seen)
		}
	}
}
