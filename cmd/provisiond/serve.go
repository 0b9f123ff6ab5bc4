package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/daemon"
)

func serveCommand(e sys) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Run the API server (initialises an empty data dir on first start)",
		Long: `Run the API server. The first start initialises the data dir (database, TLS
material, credentials.yaml); later starts reuse it.

Each flag NAME may also be set as $` + envName("NAME") + ` (upper case, "-" as "_") or as
key NAME in the YAML file of --config (or $PROVISIOND_CONFIG); flags win over
the environment, which wins over the file.

SIGINT or SIGTERM: stop accepting, close every connection, close the
database, exit 0.`,
		Example: `  provisiond serve
  provisiond serve --addr 0.0.0.0:17070 --data-dir /var/lib/provisiond --log-format json
  PROVISIOND_LOG_LEVEL=debug provisiond serve --config /etc/provisiond/provisiond.yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected arguments: %q", args)
			}
			return nil
		},
	}
	sf := bindServeFlags(cmd.Flags(), e.getenv)
	reinitialise := cmd.Flags().Bool("reinitialise", false, "make a new controller in a data dir that holds an earlier one's credentials.yaml or CA but no database\n"+
		"(its credentials.yaml is kept aside; its passwords are lost). A flag only, meant once")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		opts, err := sf.resolve(cmd.Flags(), e.getenv)
		if err != nil {
			return usageError{err}
		}
		opts.Reinitialise = *reinitialise
		log, err := newLogger(e.stderr, opts.LogFormat, opts.LogLevel)
		if err != nil {
			return usageError{err}
		}
		if err := checkAgent(opts.Agent); err != nil {
			return usageError{err}
		}
		return serve(opts, log)
	}
	return cmd
}

// serve runs the daemon until SIGINT or SIGTERM. What goes wrong is
// logged; the error returned only sets the exit status.
func serve(opts options, log *slog.Logger) error {
	cfg := opts.daemonConfig()
	cfg.Logger = log
	if err := checkBeforeOpen(cfg, log); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	d, err := daemon.Start(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		if errors.Is(err, daemon.ErrEarlierController) {
			return exitCode(exitDataDir)
		}
		return exitCode(exitError)
	}
	stopAgent, agentErr := startAgent(d, cfg.DataDir, opts.Agent, log)
	if agentErr != nil {
		log.Error("cannot start the agent", "err", agentErr)
	} else {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
		case <-d.Done():
			log.Error("server stopped unexpectedly")
		}
		stopAgent()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(sctx); err != nil {
		log.Error("shutdown", "err", err)
		return exitCode(exitError)
	}
	log.Info("stopped")
	if agentErr != nil {
		return exitCode(exitError)
	}
	return nil
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
