package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

func TestCheckAgent(t *testing.T) {
	for _, ok := range []string{"", "sim"} {
		if err := checkAgent(ok); err != nil {
			t.Errorf("checkAgent(%q): %v", ok, err)
		}
	}
	if err := checkAgent("aws"); err == nil || err.Error() != `--agent "aws": want sim (or nothing)` {
		t.Errorf("checkAgent(aws) = %v", err)
	}
	for addr, want := range map[string]string{
		"0.0.0.0:17070": "127.0.0.1:17070", "[::]:17070": "[::1]:17070",
		"127.0.0.1:1": "127.0.0.1:1", "10.0.0.5:17070": "10.0.0.5:17070",
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%s) = %s; want %s", addr, got, want)
		}
	}
}

// serve --agent sim runs the reference agent in the daemon's process: a
// machine added through the API is provisioned and its agent started;
// SIGTERM stops the agent before the daemon.
func TestServeWithAgent(t *testing.T) {
	bin := buildDaemon(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--log-format", "json", "--agent", "sim")
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
	var mu sync.Mutex
	var msgs []string
	ready, exited := make(chan string, 1), make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				mu.Lock()
				msgs = append(msgs, line.Msg)
				mu.Unlock()
				if line.Msg == "serving" {
					ready <- line.Addr
				}
			}
			if testing.Verbose() {
				t.Logf("daemon: %s", sc.Text())
			}
		}
		exited <- cmd.Wait()
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-exited:
		t.Fatalf("daemon exited: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("daemon did not start serving")
	}

	creds, err := credentials.Read(filepath.Join(dir, credentials.File))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Addr: addr, CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.LoginUser(ctx, "admin", creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	var wr params.StringsWatchResult
	if err := c.Call(ctx, "ModelAdmin", 1, "", "WatchModel", params.ModelArgs{}, &wr); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(ctx, "ModelAdmin", 1, "", "AddMachines", params.AddMachinesArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	w := client.NewStringsWatcher(c, wr.StringsWatcherId)
	for {
		var s params.ModelStatus
		if err := c.Call(ctx, "ModelAdmin", 1, "", "Status", params.ModelArgs{}, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Machines) == 1 && s.Machines[0].AgentStatus.Status == "started" && s.Machines[0].InstanceID == "i-0" {
			break
		}
		if _, err := w.Next(ctx); err != nil {
			t.Fatalf("machine 0 not started by the in-process agent: %v", err)
		}
	}
	c.Close()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	mu.Lock()
	defer mu.Unlock()
	agentStopped, stopped := slices.Index(msgs, "agent stopped"), slices.Index(msgs, "stopped")
	if agentStopped < 0 || stopped < agentStopped {
		t.Errorf("want the agent stopped before the daemon; log: %q", msgs)
	}
}
