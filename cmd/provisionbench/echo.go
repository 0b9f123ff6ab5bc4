package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/echo"
	"github.com/provisiond/provisiond/pki"
)

// echoServer is the baseline server: the same transport as the daemon
// (TLS from the same pki package, gorilla websocket with the rpc server's
// buffer sizes and write buffer pool, loopback) that answers each request
// from its read loop with its request-id and its params as the response.
// It is the floor of what any server on this transport can do.
type echoServer struct {
	addr string
	ca   []byte
	pid  int

	srv *echo.Server // in process
	cmd *exec.Cmd    // child process
	dir string
}

// startEcho starts the echo server the way the daemon runs: in a child
// process unless the daemon is in this process.
// memProfile, if set, is where the child echo server writes its heap
// profile at each reading (the daemon's --memprofile with ".echo").
func startEcho(ctx context.Context, inproc bool, memProfile string) (*echoServer, error) {
	dir, err := os.MkdirTemp("", "provisionbench-echo-")
	if err != nil {
		return nil, err
	}
	if inproc {
		srv, err := echo.Serve(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		return &echoServer{addr: srv.Addr, ca: srv.CACert, pid: os.Getpid(), srv: srv, dir: dir}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{childEchoCmd, "--dir", dir, "--settled", filepath.Join(dir, "settled")}
	if memProfile != "" {
		args = append(args, "--memprofile", memProfile+".echo")
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	es := &echoServer{cmd: cmd, pid: cmd.Process.Pid, dir: dir}
	line, err := readLine(ctx, out)
	if err != nil {
		es.close()
		return nil, fmt.Errorf("echo server: %w", err)
	}
	addr, ok := strings.CutPrefix(line, "listening ")
	if !ok {
		es.close()
		return nil, fmt.Errorf("echo server said %q", line)
	}
	es.addr = addr
	if es.ca, err = os.ReadFile(dir + "/" + pki.CACertFile); err != nil {
		es.close()
		return nil, err
	}
	return es, nil
}

func readLine(ctx context.Context, r io.Reader) (string, error) {
	ch := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ch <- strings.TrimSpace(line)
	}()
	select {
	case l := <-ch:
		if l == "" {
			return "", errors.New("no output")
		}
		return l, nil
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(time.Minute):
		return "", errors.New("timed out")
	}
}

// settle asks the echo server to collect garbage (see target.settle) and
// returns its live heap and stack bytes then (0, 0 in this process).
func (es *echoServer) settle() (live, stacks int64) {
	if es.cmd != nil {
		return settleSignal(es.cmd.Process, filepath.Join(es.dir, "settled"))
	}
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(300 * time.Millisecond)
	return 0, 0
}

func (es *echoServer) close() {
	if es.srv != nil {
		_ = es.srv.Close()
	}
	if es.cmd != nil {
		_ = es.cmd.Process.Signal(syscall.SIGTERM)
		waitOrKill(es.cmd, 10*time.Second)
	}
	os.RemoveAll(es.dir)
}

// childEcho is the hidden command that runs the echo server in a child
// process; it prints "listening ADDR" and serves until SIGTERM.
func childEcho(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(childEchoCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "")
	memProfile := fs.String("memprofile", "", "")
	settled := fs.String("settled", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *memProfile != "" {
		runtime.MemProfileRate = heapProfileRate
	}
	srv, err := echo.Serve(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "provisionbench echo:", err)
		return 1
	}
	fmt.Fprintf(stdout, "listening %s\n", srv.Addr)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	profiles := 0
	for sig := range sigs {
		if sig == syscall.SIGUSR1 {
			runtime.GC()
			debug.FreeOSMemory()
			profiles++
			if *memProfile != "" {
				writeHeapProfile(*memProfile, profiles, stderr)
			}
			childSettled(*settled, profiles)
			continue
		}
		break
	}
	_ = srv.Close()
	return 0
}
