package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Facade is the daemon facade provisionctl uses.
const (
	facadeName    = "ModelAdmin"
	facadeVersion = 1
)

// EnvCredentials names the credentials file when --credentials is not given.
const EnvCredentials = "PROVISIOND_CREDENTIALS"

// EnvModel names the default model of -m (else "default").
const EnvModel = "PROVISIOND_MODEL"

const dialTimeout = 10 * time.Second

// app is one invocation: its output streams, its global flags and its
// connection (made on first use).
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	credsFlag string
	conn      *client.Conn
	creds     *credentials.Credentials
	addr      string // the address conn is dialled to

	// verb is the command line's verb ("remove-model"), for messages.
	verb string

	loginWaited time.Duration // waited so far for logins to be tried again (loginRetryBudget)
}

// credentialsPath applies the lookup order: --credentials, then
// $PROVISIOND_CREDENTIALS, then the default data dir.
func (a *app) credentialsPath() string {
	if a.credsFlag != "" {
		return a.credsFlag
	}
	if p := a.getenv(EnvCredentials); p != "" {
		return p
	}
	return credentials.DefaultPath(a.getenv)
}

// connect dials the daemon's controller endpoint and logs in as the admin
// user, once per invocation.
func (a *app) connect(ctx context.Context) (*client.Conn, error) {
	if a.conn != nil {
		return a.conn, nil
	}
	path := a.credentialsPath()
	creds, err := a.readCredentials()
	if err != nil {
		return nil, err
	}
	if len(creds.APIAddresses) == 0 {
		return nil, fmt.Errorf("credentials file %s lists no api-addresses", path)
	}
	if creds.AdminPassword == "" {
		return nil, fmt.Errorf("credentials file %s has no admin-password", path)
	}
	user := creds.AdminUser
	if user == "" {
		user = "admin"
	}
	var errs []error
	for _, addr := range creds.APIAddresses {
		c, err := client.Dial(ctx, client.Config{Addr: addr, CACert: []byte(creds.CACert), DialTimeout: dialTimeout})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, dialCause(err)))
			continue
		}
		if _, err := c.LoginUser(ctx, user, creds.AdminPassword); err != nil {
			_ = c.Close()
			if wait, ok := a.retryLogin(ctx, err); ok {
				a.infof("The daemon asks to try again in %s (%v); waiting.", wait, err)
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(wait):
				}
				return a.connect(ctx)
			}
			return nil, fmt.Errorf("login as %s: %w", user, err)
		}
		a.conn, a.creds, a.addr = c, creds, addr
		return c, nil
	}
	return nil, fmt.Errorf("cannot connect to provisiond: %w (is it running? the addresses are those of %s)", errors.Join(errs...), path)
}

// loginRetryBudget bounds how long provisionctl waits, in all, for logins
// the daemon asks it to try again later (a throttle's "retry-after").
const loginRetryBudget = 60 * time.Second

// retryLogin says whether a refused login is to be tried again, and after
// how long: a "try again" with a retry-after (or without one: a second)
// that fits in what is left of loginRetryBudget.
func (a *app) retryLogin(ctx context.Context, err error) (time.Duration, bool) {
	var pe *params.Error
	if !errors.As(err, &pe) || pe.Code != params.CodeTryAgain {
		return 0, false
	}
	wait := time.Second
	if n, ok := pe.Info["retry-after"].(float64); ok && n > 0 {
		wait = time.Duration(n * float64(time.Second))
	}
	if a.loginWaited+wait > loginRetryBudget {
		return 0, false
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		return 0, false
	}
	a.loginWaited += wait
	return wait, true
}

// dialCause is the innermost cause of a dial error ("connection refused"),
// without the URL the client adds.
func dialCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// reconnect drops the connection and dials again, as connect does.
func (a *app) reconnect(ctx context.Context) error {
	if a.conn != nil {
		_ = a.conn.Close()
		a.conn = nil
	}
	_, err := a.connect(ctx)
	return err
}

// call calls a ModelAdmin method. Its errors speak of the verb, never of
// the method (see callError).
func (a *app) call(ctx context.Context, method string, args, result any) error {
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	return a.explain(method, c.Call(ctx, facadeName, facadeVersion, "", method, args, result))
}

// explain turns an error of a call into what an operator can act on: the
// server's message as it is; a method the daemon lacks as a verb this
// daemon does not support; anything else without the facade and method
// names the client puts in its messages.
func (a *app) explain(method string, err error) error {
	if err == nil {
		return nil
	}
	var pe *params.Error
	if errors.As(err, &pe) {
		if pe.Code == params.CodeNotImplemented {
			return fmt.Errorf("the daemon does not support %s: it is older than this provisionctl (%s); upgrade provisiond", a.verbName(), buildinfo.Version)
		}
		return err
	}
	if errors.Is(err, client.ErrConnClosed) {
		return fmt.Errorf("lost the connection to provisiond at %s: %s", a.addr, scrub(dialCause(err).Error(), method))
	}
	return callError{scrub(err.Error(), method)}
}

func (a *app) verbName() string {
	if a.verb == "" {
		return "this verb"
	}
	return a.verb
}

// callError is an error of a call that did not come from the server.
type callError struct{ msg string }

func (e callError) Error() string { return e.msg }

// scrub removes the client's "client: " prefix and the facade and method
// names from a message.
func scrub(msg, method string) string {
	msg = strings.TrimPrefix(msg, "client: ")
	msg = strings.ReplaceAll(msg, " "+facadeName+"."+method+" ", " ")
	return strings.ReplaceAll(msg, facadeName+"."+method, "the call")
}

func (a *app) close() {
	if a.conn != nil {
		_ = a.conn.Close()
	}
}

// infof writes a message for people to stderr.
func (a *app) infof(format string, args ...any) {
	fmt.Fprintf(a.stderr, format+"\n", args...)
}

// rootCommand builds the command tree. Each verb group lives in its own
// file and adds its commands here.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "provisionctl",
		Short: "Operate a provisiond controller: models, config, machines, networking, status",
		Long: `provisionctl creates, changes and shows what provisiond's agents provision.

It talks to the daemon over its API as the admin user, with the addresses,
CA certificate and password of credentials.yaml: --credentials FILE, then
$PROVISIOND_CREDENTIALS, then credentials.yaml in the daemon's default data
dir ($XDG_DATA_HOME/provisiond or ~/.local/share/provisiond).

Data goes to stdout (--format table, json or yaml), messages and errors to
stderr. Exit status: 0 on success; 2 when the input is not valid (a usage
error, or a value the daemon refuses as not valid); 1 on any other failure.`,
		Example: `  provisionctl models
  provisionctl add-model k8s --type caas
  provisionctl add-machine lxd:0
  provisionctl deploy gitlab --charm-metadata metadata.yaml -m k8s --scale 3
  provisionctl status
  provisionctl --credentials /var/lib/provisiond/credentials.yaml models --format json`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.PersistentFlags().StringVar(&a.credsFlag, "credentials", "",
		"credentials.yaml of the daemon (default $"+EnvCredentials+", then the default data dir)")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { a.verb = cmd.Name() }
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddGroup(&cobra.Group{ID: "models", Title: "Models:"}, &cobra.Group{ID: "config", Title: "Configuration:"},
		&cobra.Group{ID: "machines", Title: "Machines:"}, &cobra.Group{ID: "network", Title: "Networking:"},
		&cobra.Group{ID: "applications", Title: "Applications:"}, &cobra.Group{ID: "storage", Title: "Storage:"},
		&cobra.Group{ID: "observe", Title: "Observing:"})

	a.addModelCommands(root)
	a.addConfigCommands(root)
	a.addMachineCommands(root)
	a.addAgentBinariesCommands(root)
	a.addNetworkCommands(root)
	a.addApplicationCommands(root)
	a.addStorageCommands(root)
	a.addStatusCommands(root)
	a.addWatchCommands(root)
	a.addShowCommands(root)
	a.addControllerCommands(root)

	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = "  provisionctl help add-model"
		case "completion":
			c.Example = `  source <(provisionctl completion bash)
  provisionctl completion zsh > "${fpath[1]}/_provisionctl"
  provisionctl completion fish > ~/.config/fish/completions/provisionctl.fish`
			var shells []string
			for _, sub := range c.Commands() {
				sub.Example = "  provisionctl completion " + sub.Name() + " --help"
				shells = append(shells, sub.Name())
			}
			// A shell cobra has no script for is a usage error, not the
			// command's help with status 0.
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) == 0 {
					return usagef("completion needs a shell: %s", strings.Join(shells, ", "))
				}
				return usagef("completion has no script for %q: the shells are %s", args[0], strings.Join(shells, ", "))
			}
		}
	}
	return root
}

// exactArgs is cobra.ExactArgs reporting a usage error with the names.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			if len(names) == 0 {
				return usagef("%s takes no arguments, got %q", cmd.Name(), args)
			}
			return usagef("%s needs %s, got %s", cmd.Name(), strings.Join(names, " "), arguments(len(args)))
		}
		return nil
	}
}

// arguments says "n argument(s)" in English: "1 argument", "2 arguments".
func arguments(n int) string {
	if n == 1 {
		return "1 argument"
	}
	return strconv.Itoa(n) + " arguments"
}

// completeModels completes model names by asking the daemon; it offers
// nothing when the daemon cannot be reached.
func (a *app) completeModels(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	names, err := a.modelNames(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// requireFlags checks, before anything is sent, that the named flags were
// given; a usage error names every one missing.
func requireFlags(cmd *cobra.Command, names ...string) error {
	var missing []string
	for _, n := range names {
		if !cmd.Flags().Changed(n) {
			missing = append(missing, "--"+n)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return usagef("%s needs %s", cmd.Name(), missing[0])
	}
	return usagef("%s needs %s and %s", cmd.Name(), strings.Join(missing[:len(missing)-1], ", "), missing[len(missing)-1])
}
