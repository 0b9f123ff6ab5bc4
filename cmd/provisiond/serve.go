package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
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

Without --config or $PROVISIOND_CONFIG, the file provisiond.yaml of
$CONFIGURATION_DIRECTORY (systemd's ConfigurationDirectory=, /etc/provisiond
in the shipped unit) is read when it exists.

SIGINT or SIGTERM: stop accepting, close every connection (with --drain,
spread over that long first), close the database, exit 0. If the database
file is removed, replaced or truncated while the daemon runs, it refuses
every request from then on, saves what it holds (provisiond.db.rescued,
when the file was removed or replaced), stops and exits 3. SIGHUP: read the settings again and apply what can change
while serving (log-level, login-rate-max, login-rate-refill, drain, the TLS
certificate from its files, the audit log reopened), logging what changed
and which other changes wait for a restart.

Under systemd (Type=notify) it reports READY=1 once serving, RELOADING=1
and READY=1 around a reload, STOPPING=1, and pings the watchdog
(WatchdogSec=) every half period while healthy.`,
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
		level := new(slog.LevelVar)
		log, err := newLevelLogger(e.stderr, opts.LogFormat, opts.LogLevel, level)
		if err != nil {
			return usageError{err}
		}
		if err := checkAgent(opts.Agent); err != nil {
			return usageError{err}
		}
		cfg := opts.daemonConfig()
		if err := cfg.Validate(); err != nil {
			return usageError{err} // a setting out of range: as a bad flag
		}
		svc := &service{
			log:      log,
			level:    level,
			sd:       newNotifier(e.getenv),
			watchdog: watchdogInterval(e.getenv),
			reread:   func() (options, error) { return sf.resolve(cmd.Flags(), e.getenv) },
		}
		return serve(opts, svc)
	}
	return cmd
}

// service is what serve needs beside the options: the logger and its
// level, the service manager's notification socket and watchdog period,
// and how to read the settings again on SIGHUP.
type service struct {
	log      *slog.Logger
	level    *slog.LevelVar
	sd       *notifier
	watchdog time.Duration
	reread   func() (options, error)
}

// notify tells systemd, logging (not failing) when it cannot.
func (s *service) notify(msg string) {
	if err := s.sd.notify(msg); err != nil {
		s.log.Warn("cannot notify the service manager", "err", err)
	}
}

// serve runs the daemon until SIGINT or SIGTERM, reloading on SIGHUP.
// What goes wrong is logged; the error returned only sets the exit status.
func serve(opts options, s *service) error {
	log := s.log
	cfg := opts.daemonConfig()
	cfg.Logger = log
	if err := checkBeforeOpen(cfg, log); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	d, err := daemon.Start(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		if errors.Is(err, daemon.ErrEarlierController) {
			return exitCode(exitDataDir)
		}
		return exitCode(exitError)
	}
	stopAgent, agentErr := startAgent(d, cfg.DataDir, opts.Agent, log)
	storeFailed := false
	if agentErr != nil {
		log.Error("cannot start the agent", "err", agentErr)
	} else {
		s.notify("READY=1\nSTATUS=serving on " + d.Addr())
		stopWatchdog := s.startWatchdog(d)
	loop:
		for {
			select {
			case <-ctx.Done():
				log.Info("shutting down")
				break loop
			case <-d.Done():
				log.Error("server stopped unexpectedly")
				break loop
			case <-d.Failed():
				// The store logged why; every request is refused.
				storeFailed = true
				s.notify("STATUS=the database cannot be used: " + d.Failure().Error())
				break loop
			case <-hup:
				opts = s.reload(d, opts)
			}
		}
		stopWatchdog()
		stopAgent()
	}
	s.notify("STOPPING=1\nSTATUS=shutting down")
	if opts.Drain > 0 && !storeFailed {
		s.notify("STATUS=draining the connections over " + opts.Drain.String())
		if err := d.Drain(context.Background(), opts.Drain); err != nil {
			log.Warn("draining: not every connection was told to close in time; the stop closes the rest", "err", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
	defer cancel()
	if err := stopWithin(sctx, d, stopGrace, log); err != nil && !storeFailed {
		log.Error("shutdown", "err", err)
		return exitCode(exitError)
	}
	if storeFailed {
		// Restarting will not help until the operator acts: the
		// database is gone (its copy, if made, is named above) or
		// damaged.
		log.Error("stopped: the database file was taken from under the daemon", "err", d.Failure())
		return exitCode(exitDataDir)
	}
	log.Info("stopped")
	if agentErr != nil {
		return exitCode(exitError)
	}
	return nil
}

// stopGrace is how long past --shutdown-timeout serve waits for the
// daemon's Shutdown before it exits without it.
const stopGrace = 5 * time.Second

// errStopOverran is stopWithin's error when Shutdown did not return in
// time.
var errStopOverran = errors.New("the stop overran its budget; exiting without waiting for it")

// stopWithin runs d.Shutdown(ctx) and returns its error, or
// errStopOverran once grace has passed after ctx's deadline without it.
// The daemon's budget (ctx) bounds each step of its stop; this is the last
// resort for a step that still does not end, so that the process always
// exits: every acknowledged write is durable already (a write is answered
// only once it is), and a store left unclosed is opened as after a crash.
// Before it returns errStopOverran it logs what the daemon's goroutines
// were doing (their stacks, grouped), to find the step. The Shutdown
// goroutine is left to the process's exit.
func stopWithin(ctx context.Context, d *daemon.Daemon, grace time.Duration, log *slog.Logger) error {
	stopped := make(chan error, 1)
	go func() { stopped <- d.Shutdown(ctx) }()
	var limit <-chan time.Time // no deadline: wait for Shutdown
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl) + grace)
		defer t.Stop()
		limit = t.C
	}
	select {
	case err := <-stopped:
		return err
	case <-limit:
	}
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	stacks := b.String()
	if len(stacks) > maxLoggedStacks {
		stacks = stacks[:maxLoggedStacks] + "\n... (cut)"
	}
	log.Error("stopping: the stop did not end within its budget and grace; every acknowledged write is durable, the store is opened as after a crash at the next start",
		"grace", grace, "goroutines", stacks)
	return errStopOverran
}

// maxLoggedStacks bounds the goroutine stacks stopWithin logs.
const maxLoggedStacks = 64 << 10

// startWatchdog pings systemd's watchdog every half period while the
// daemon is healthy; the function returned stops it and waits.
func (s *service) startWatchdog(d *daemon.Daemon) (stop func()) {
	if s.watchdog <= 0 || s.sd == nil {
		return func() {}
	}
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(s.watchdog)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := d.Healthy(); err != nil {
					s.log.Warn("unhealthy: not pinging the watchdog", "err", err)
					continue
				}
				s.notify("WATCHDOG=1")
			}
		}
	}()
	s.log.Info("pinging the service manager's watchdog", "every", s.watchdog.String())
	return func() { close(done); <-exited }
}

// liveSettings change on a reload; the others wait for a restart.
var liveSettings = map[string]bool{"log-level": true, "login-rate-max": true, "login-rate-refill": true, "history-retention": true, "drain": true, "rebalance": true}

// reload reads the settings again (flags, environment and config file, as
// at start), applies those that can change while serving and logs what it
// did. It returns the options now in force.
func (s *service) reload(d *daemon.Daemon, cur options) options {
	s.notify("RELOADING=1\nSTATUS=reloading")
	defer s.notify("READY=1\nSTATUS=serving on " + d.Addr())
	next, err := s.reread()
	if err != nil {
		s.log.Error("reload: the settings do not read; nothing changed", "err", err)
		return cur
	}
	var did []string
	if next.LogLevel != cur.LogLevel {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(next.LogLevel)); err != nil {
			s.log.Error("reload: --log-level: want debug, info, warn or error; nothing changed", "log-level", next.LogLevel)
			return cur
		}
		s.level.Set(lvl)
		did = append(did, fmt.Sprintf("log-level %s -> %s", cur.LogLevel, next.LogLevel))
		cur.LogLevel = next.LogLevel
	}
	changes, err := d.Reload(next.live())
	did = append(did, changes...)
	if err != nil {
		s.log.Error("reload", "err", err)
	} else {
		cur.LoginRateMax, cur.LoginRateRefill = next.LoginRateMax, next.LoginRateRefill
		cur.HistoryRetention, cur.historyRetention = next.HistoryRetention, next.historyRetention
		cur.Rebalance = next.Rebalance
	}
	if next.Drain != cur.Drain {
		// Read at the stop: a rolling restart's operator may set it just
		// before.
		did = append(did, fmt.Sprintf("drain %s -> %s", cur.Drain, next.Drain))
		cur.Drain = next.Drain
	}
	var later []string
	nexts := next.settings()
	for i, st := range cur.settings() {
		if !liveSettings[st.name] && fmt.Sprint(derefSetting(st.ptr)) != fmt.Sprint(derefSetting(nexts[i].ptr)) {
			later = append(later, st.name)
		}
	}
	if len(later) > 0 {
		s.log.Warn("reload: these changes take effect at the next start", "settings", strings.Join(later, ", "))
	}
	if len(did) == 0 {
		s.log.Info("reloaded: nothing to change")
	} else {
		s.log.Info("reloaded", "changed", strings.Join(did, "; "))
	}
	return cur
}

func derefSetting(p any) any {
	switch p := p.(type) {
	case *string:
		return *p
	case *int:
		return *p
	case *int64:
		return *p
	case *time.Duration:
		return *p
	}
	return p
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	return newLevelLogger(w, format, level, new(slog.LevelVar))
}

// newLevelLogger is the daemon's logger, its level held by lv (so that a
// reload can change it).
func newLevelLogger(w io.Writer, format, level string, lv *slog.LevelVar) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	lv.Set(lvl)
	hopts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
