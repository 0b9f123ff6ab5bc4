// Command provisionctl is the operator CLI of provisiond: it creates,
// changes and shows what the agents provision, over the daemon's API
// (facade ModelAdmin v1) as the admin user.
//
//	provisionctl models                       list the models
//	provisionctl add-model NAME --type caas   add a model
//	provisionctl model-config k=v             change a model's config
//	provisionctl add-machine lxd:0            add a container to machine 0
//	provisionctl add-subnet CIDR --space S ...  add a subnet the provider allocates from
//	provisionctl deploy APP --charm-metadata F deploy an application from metadata.yaml
//	provisionctl scale APP N                  scale a caas application
//	provisionctl add-unit APP --to 3          add an iaas unit on machine 3
//	provisionctl create-storage-pool N P      add a storage pool
//	provisionctl status                       machines, networking, applications, units, storage
//	provisionctl watch                        print a model's changes as they commit
//
// It finds the daemon and the admin password in credentials.yaml:
// --credentials FILE, then $PROVISIOND_CREDENTIALS, then credentials.yaml in
// the daemon's default data dir. Run "provisionctl help" for every verb;
// docs/provisionctl.md has a walk-through and docs/cli.md every verb's help.
//
// Output: data on stdout (--format table, json or yaml; with json or yaml
// nothing else is ever written there), messages and errors on stderr. Exit
// status: 0 on success; 2 when the input is wrong, whether provisionctl
// finds it (a verb, argument, flag, KEY=VALUE or size it cannot parse) or
// the daemon does (a value it refuses as not valid: a constraint, a name,
// a config value); 1 when the command failed otherwise (not found,
// already exists, refused in the entity's current state, unreachable,
// unauthorised). The daemon's message is printed either way.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/provisiond/provisiond/rpc/params"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// run runs one provisionctl command line and returns its exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	defer a.close()
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "ERROR %s\n", err)
	if isUsage(err) {
		fmt.Fprintln(stderr, `Run "provisionctl help" or "provisionctl VERB --help" for usage.`)
		return exitUsage
	}
	if params.ErrCode(err) == params.CodeNotValid {
		return exitUsage
	}
	return exitError
}

// usageError is a mistake on the command line, found before anything is
// sent to the daemon.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func isUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	// cobra's own errors for unknown verbs.
	return strings.HasPrefix(err.Error(), "unknown command ")
}
