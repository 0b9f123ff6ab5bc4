// Command provisiond is the Juju-wire-compatible provisioning API server.
//
//	provisiond serve [flags]                   run the daemon (initialises an empty data dir)
//	provisiond backup --output FILE            snapshot a running daemon
//	provisiond restore FILE --data-dir DIR     unpack a backup into a data dir
//	provisiond check [--data-dir DIR]          check a stopped daemon's database
//	provisiond version                         print the version
//
// See README.md for the flags, the environment variables and the YAML
// config file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "backup":
		return backup(args[1:], stderr)
	case "restore":
		return restore(args[1:], stderr)
	case "check":
		return check(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "provisiond %s (Juju API %s)\n", version, daemon.ServerVersion)
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "provisiond: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: provisiond <command> [flags]

commands:
  serve     run the API server (initialises an empty data dir on first start)
  backup    snapshot a running daemon into an archive (--output FILE)
  restore   unpack a backup archive into a data dir (FILE --data-dir DIR)
  check     check a stopped daemon's database read-only (--data-dir DIR)
  version   print the version

Run "provisiond serve -h" for the flags of serve.
`)
}

func serve(args []string, stderr io.Writer) int {
	opts, err := loadOptions(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "provisiond: %v\n", err)
		return 2
	}
	log, err := newLogger(stderr, opts.LogFormat, opts.LogLevel)
	if err != nil {
		fmt.Fprintf(stderr, "provisiond: %v\n", err)
		return 2
	}
	cfg := opts.daemonConfig()
	cfg.Logger = log

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	d, err := daemon.Start(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case <-d.Done():
		log.Error("server stopped unexpectedly")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
