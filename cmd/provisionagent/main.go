// Command provisionagent is provisiond's reference agent: it drives a
// running daemon's API the way Juju's agents do (the controller agent's
// provisioners of every model, a machine agent per provisioned machine)
// against a simulated cloud, so that machines, containers and pods really
// get provisioned and torn down. See package internal/agent.
//
//	provisionagent [--credentials FILE] [--cloud sim] [--log-format text|json] [--log-level LEVEL]
//
// It finds the daemon as provisionctl does: --credentials FILE, then
// $PROVISIOND_CREDENTIALS, then credentials.yaml in the daemon's default
// data dir. It runs until SIGINT or SIGTERM, reconnecting with backoff
// whenever the daemon goes away.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/agent"
)

// EnvCredentials names the credentials file when --credentials is not
// given (as for provisionctl).
const EnvCredentials = "PROVISIOND_CREDENTIALS"

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// usageError marks errors found in the command line (exit status 2).
type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	var credsFlag, cloud, logFormat, logLevel string
	var minBackoff, maxBackoff time.Duration
	root := &cobra.Command{
		Use:   "provisionagent",
		Short: "Provision what a provisiond controller asks for, in a simulated cloud",
		Long: `provisionagent is provisiond's reference agent. It logs in to a running daemon
as its controller agent and runs, for every model, what Juju's controller runs:
the environ provisioner of IAAS models (it starts an instance for each new
machine and runs that machine's agent, which provisions its containers) and the
unit provisioner of Kubernetes models (it runs each application's pods). Dying
machines, containers and applications are torn down and removed.

The cloud is simulated (--cloud sim, the only one): instances start at once
with ids, hardware from their constraints and interfaces on the model's
subnets; containers get their addresses from the controller; pods get
provider ids, addresses and volumes. It keeps its state in memory.

The daemon is found as provisionctl finds it: --credentials FILE, then
$PROVISIOND_CREDENTIALS, then credentials.yaml in the daemon's default data dir.
It needs the file's controller-agent login and admin password. It runs until
SIGINT or SIGTERM; when the daemon goes away it reconnects with backoff.`,
		Example: `  provisionagent
  provisionagent --credentials /var/lib/provisiond/credentials.yaml --log-format json`,
		Version: version,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected argument %q", args[0])}
			}
			return nil
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cloud != "sim" {
				return usageError{fmt.Errorf("--cloud %q: the only cloud is sim", cloud)}
			}
			log, err := newLogger(stderr, logFormat, logLevel)
			if err != nil {
				return usageError{err}
			}
			path := credsFlag
			if path == "" {
				path = getenv(EnvCredentials)
			}
			if path == "" {
				path = credentials.DefaultPath(getenv)
			}
			creds, err := credentials.Read(path)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no credentials file %s: start provisiond, or pass --credentials FILE or $%s", path, EnvCredentials)
			}
			if err != nil {
				return err
			}
			a, err := agent.New(agent.Config{
				Credentials: creds, Cloud: agent.NewSimCloud(), Logger: log,
				MinBackoff: minBackoff, MaxBackoff: maxBackoff,
			})
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return a.Run(ctx)
		},
	}
	f := root.Flags()
	f.StringVar(&credsFlag, "credentials", "", "credentials.yaml of the daemon (default $"+EnvCredentials+", then the default data dir)")
	f.StringVar(&cloud, "cloud", "sim", "the cloud to provision in: sim (simulated)")
	f.StringVar(&logFormat, "log-format", "text", "log format on stderr: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.DurationVar(&minBackoff, "min-backoff", 100*time.Millisecond, "first wait before reconnecting")
	f.DurationVar(&maxBackoff, "max-backoff", 10*time.Second, "longest wait before reconnecting")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "ERROR %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "ERROR %v\n", err)
		return 1
	}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
