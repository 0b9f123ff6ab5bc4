package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
)

// The hidden commands the tool re-executes itself with: the daemon under
// test in a child process (and, in echo.go, the baseline echo server).

// childDaemonCmd is the hidden command that runs the daemon in a child
// process; childEchoCmd runs the baseline echo server.
const (
	childDaemonCmd = "internal-daemon"
	childEchoCmd   = "internal-echo"
)

// heapProfileRate is the heap profile's sampling rate in a child with
// --memprofile: one sample per 4 KiB allocated on average instead of the
// runtime's 512 KiB, so the objects of one connection (most well under
// 4 KiB) show in a profile of a few thousand agents. It costs the child
// some CPU per allocation, not memory worth counting.
const heapProfileRate = 4096

// writeHeapProfile writes the heap profile (in use after the GC that
// settle asked for) to path and to path.N, N counting the profiles this
// process wrote from 1 (conns: before the agents, logged in, watching).
func writeHeapProfile(path string, n int, stderr io.Writer) {
	writeHeapProfileFile(path, stderr)
	writeHeapProfileFile(fmt.Sprintf("%s.%d", path, n), stderr)
}

func writeHeapProfileFile(path string, stderr io.Writer) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "provisionbench daemon: heap profile:", err)
	}
}

// windowProfiler is a child daemon's --window-cpuprofile: SIGUSR2 writes
// the heap profile to path.N.start.heap and starts a CPU profile to path.N
// (N counting windows from 1), the next SIGUSR2 stops it and writes the
// heap profile to path.N.heap; pprof -base path.N.start.heap path.N.heap
// shows what the window allocated. Used by the signal loop's goroutine
// only.
type windowProfiler struct {
	path   string
	stderr io.Writer
	n      int
	f      *os.File // the profile being written; nil: none
}

func (w *windowProfiler) toggle() {
	if w.path == "" {
		return
	}
	if w.f != nil {
		w.stop()
		return
	}
	w.n++
	// A heap profile's allocation figures are as of the last collection:
	// one now makes them the window's start (its marking falls in the
	// window's first moments, before the CPU profile starts).
	runtime.GC()
	writeHeapProfileFile(fmt.Sprintf("%s.%d.start.heap", w.path, w.n), w.stderr)
	f, err := os.Create(fmt.Sprintf("%s.%d", w.path, w.n))
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(w.stderr, "provisionbench daemon: window CPU profile:", err)
		return
	}
	w.f = f
}

// stop ends the window's CPU profile and writes the heap profile as the
// window closes (path.N.heap), after a collection, so that its in-use
// figures are the heap live then; its allocation figures count from the
// process's start, set-up included (-base against the window's
// start.heap subtracts that). The collection comes after the tool's end
// reading of the window's CPU.
func (w *windowProfiler) stop() {
	if w.f == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := w.f.Close(); err != nil {
		fmt.Fprintln(w.stderr, "provisionbench daemon: window CPU profile:", err)
	}
	w.f = nil
	runtime.GC()
	writeHeapProfileFile(fmt.Sprintf("%s.%d.heap", w.path, w.n), w.stderr)
}

// childDaemon is the hidden command that serves the daemon in a child
// process: daemon.Start with the defaults (login rate limiting on), the
// CAAS seed, SIGTERM for a graceful shutdown, SIGUSR1 to collect garbage.
func childDaemon(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(childDaemonCmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "")
	addr := fs.String("addr", "", "")
	apps := fs.Int("caas-apps", 0, "")
	cpuProfile := fs.String("cpuprofile", "", "")
	memProfile := fs.String("memprofile", "", "")
	windowProfile := fs.String("window-cpuprofile", "", "")
	settled := fs.String("settled", "", "")
	cfg := daemon.Default("")
	fs.IntVar(&cfg.LoginRateMax, "login-rate-max", cfg.LoginRateMax, "")
	fs.DurationVar(&cfg.LoginRateRefill, "login-rate-refill", cfg.LoginRateRefill, "")
	fs.IntVar(&cfg.LoginConcurrent, "login-concurrent", cfg.LoginConcurrent, "")
	fs.DurationVar(&cfg.ShedLatency, "shed-latency", cfg.ShedLatency, "")
	drain := fs.Duration("drain", 0, "")
	fs.BoolVar(&cfg.Rebalance, "rebalance", cfg.Rebalance, "")
	fs.IntVar(&cfg.MaxWatchers, "max-watchers", cfg.MaxWatchers, "")
	fs.IntVar(&cfg.MaxConns, "max-connections", cfg.MaxConns, "")
	fs.StringVar(&cfg.Store, "store", "", "")
	endpoints := fs.String("etcd-endpoints", "", "")
	fs.StringVar(&cfg.Etcd.Prefix, "etcd-prefix", "", "")
	fs.StringVar(&cfg.Etcd.CAFile, "etcd-ca-file", "", "")
	fs.StringVar(&cfg.Etcd.CertFile, "etcd-cert-file", "", "")
	fs.StringVar(&cfg.Etcd.KeyFile, "etcd-key-file", "", "")
	fs.StringVar(&cfg.Etcd.Username, "etcd-username", "", "")
	cfg.Etcd.Password = os.Getenv(etcdPasswordEnv)
	fs.IntVar(&cfg.Etcd.MaxTxnOps, "etcd-max-txn-ops", 0, "")
	fs.IntVar(&cfg.Etcd.MaxRequestBytes, "etcd-max-request-bytes", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *endpoints != "" {
		cfg.Etcd.Endpoints = strings.Split(*endpoints, ",")
	}
	cfg.DataDir, cfg.Addr = *dataDir, *addr
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *memProfile != "" {
		runtime.MemProfileRate = heapProfileRate
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "provisionbench daemon:", err)
			return 1
		}
		defer f.Close()
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	d, err := daemon.Start(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "provisionbench daemon:", err)
		return 1
	}
	if *apps > 0 {
		if _, err := seedCAAS(d.State(), *apps); err != nil {
			fmt.Fprintln(stderr, "provisionbench daemon:", err)
			return 1
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)
	profiles := 0
	window := &windowProfiler{path: *windowProfile, stderr: stderr}
	defer window.stop()
	for sig := range sigs {
		if sig == syscall.SIGUSR2 {
			window.toggle()
			continue
		}
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
	_ = d.Drain(context.Background(), *drain) // as provisiond serve's --drain (0: none)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		fmt.Fprintln(stderr, "provisionbench daemon: shutdown:", err)
		return 1
	}
	return 0
}
