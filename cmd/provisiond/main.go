// Command provisiond is the Juju-wire-compatible provisioning API server.
//
//	provisiond serve [flags]                   run the daemon (initialises an empty data dir)
//	provisiond backup --output FILE            snapshot a running daemon
//	provisiond restore FILE --data-dir DIR     unpack a backup into a data dir
//	provisiond check [--data-dir DIR]          check a stopped daemon's database
//	provisiond repair [--data-dir DIR]         repair a damaged meta page of a stopped daemon's database
//	provisiond migrate --from-data-dir DIR --to etcd ...  copy a stopped controller to etcd, or back
//	provisiond reclaim-etcd-space --etcd-endpoints URLS  free etcd's space after its quota was reached
//	provisiond version                         print the version
//
// The verbs are cobra commands (as provisionctl's), one file each; a new
// verb adds its constructor to the list in rootCommand. See
// docs/operator-guide.md for the flags, the environment variables and the
// YAML config file, and docs/cli.md for every verb's help.
//
// Exit status: 0 on success, 1 when the command failed, 2 for a usage
// error (unknown verb or flag, wrong arguments, a bad setting), found
// before anything is done.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/internal/daemon"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	// exitDataDir: serve refused a data dir that holds an earlier
	// controller's files but no database (daemon.ErrEarlierController),
	// or a damaged database (repair.go), or stopped because its database
	// file was removed, replaced or truncated while it ran; restarting
	// will not help (systemd: RestartPreventExitStatus=3).
	exitDataDir = 3
)

// sys is what a command reads from its environment.
type sys struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

// run runs one provisiond command line and returns its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runEnv(args, sys{stdout: stdout, stderr: stderr, getenv: os.Getenv})
}

func runEnv(args []string, e sys) int {
	root := rootCommand(e)
	root.SetArgs(longFlags(root, args))
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintf(e.stderr, "ERROR %s\n", err)
	if isUsage(err) {
		fmt.Fprintln(e.stderr, `Run "provisiond help" or "provisiond VERB --help" for usage.`)
		return exitUsage
	}
	return exitError
}

// rootCommand builds the command tree. Each verb lives in its own file
// and is listed here.
func rootCommand(e sys) *cobra.Command {
	root := &cobra.Command{
		Use:   "provisiond",
		Short: "The provisiond API server: serve, back up, restore and check its data",
		Long: `provisiond is a Juju-wire-compatible controller API server for provisioning
agents. "provisiond serve" runs it; the other verbs work on a data dir or on
a running daemon.

Exit status: 0 on success, 1 on failure, 2 on a usage error.`,
		Example: `  provisiond serve --addr 0.0.0.0:17070 --data-dir /var/lib/provisiond
  provisiond backup --output provisiond-backup.tar
  provisiond check --data-dir /var/lib/provisiond`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// No verb: the usage on stderr, exit 2. (Args stays nil so that
		// cobra suggests verbs for a typo.)
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(e.stderr)
			_ = cmd.Usage()
			return exitCode(exitUsage)
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, newCmd := range []func(sys) *cobra.Command{
		serveCommand,
		backupCommand,
		restoreCommand,
		checkCommand,
		migrateCommand,
		reclaimEtcdSpaceCommand,
		resetAdminPasswordCommand,
		rotateCertCommand,
		versionCommand,
		repairCommand,
		internalCheckCommand,
	} {
		root.AddCommand(newCmd(e))
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = "  provisiond help serve"
		case "completion":
			c.Example = `  source <(provisiond completion bash)
  provisiond completion zsh > "${fpath[1]}/_provisiond"`
		}
	}
	return root
}

func versionCommand(e sys) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version and the Juju API level served",
		Example: "  provisiond version",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintf(e.stdout, "provisiond %s, Juju API %s\n", buildinfo.Get(), daemon.ServerVersion)
			return nil
		},
	}
}

// longFlags keeps the command lines of the flag-package days working:
// "-data-dir X" and "-version" become "--data-dir X" and "version". A
// single-dash word is rewritten only when it names a long flag of the
// verb (pflag reads "-ab" as shorthands a and b).
func longFlags(root *cobra.Command, args []string) []string {
	if len(args) > 0 && (args[0] == "-version" || args[0] == "--version") {
		return append([]string{"version"}, args[1:]...)
	}
	for i, a := range args {
		if a == "-help" {
			args = append(slices.Clone(args[:i]), append([]string{"--help"}, args[i+1:]...)...)
			break
		}
	}
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && lookupFlag(cmd, name) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f
	}
	return cmd.InheritedFlags().Lookup(name)
}

// usageError is a mistake on the command line, found before anything is
// done.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func isUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	// cobra's own error for an unknown verb (with its suggestions).
	return strings.HasPrefix(err.Error(), "unknown command ")
}

// exitCode ends the command with that status; what it had to say is
// already written.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// noArgs is cobra.NoArgs reporting a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.Name(), args)
	}
	return nil
}
