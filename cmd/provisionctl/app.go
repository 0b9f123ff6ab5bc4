package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/rpc/client"
)

// Facade is the daemon facade provisionctl uses.
const (
	facadeName    = "ModelAdmin"
	facadeVersion = 1
)

// EnvCredentials names the credentials file when --credentials is not given.
const EnvCredentials = "PROVISIOND_CREDENTIALS"

const dialTimeout = 10 * time.Second

// app is one invocation: its output streams, its global flags and its
// connection (made on first use).
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	credsFlag string
	conn      *client.Conn
	creds     *credentials.Credentials
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
			errs = append(errs, err)
			continue
		}
		if _, err := c.LoginUser(ctx, user, creds.AdminPassword); err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("login as %s: %w", user, err)
		}
		a.conn, a.creds = c, creds
		return c, nil
	}
	return nil, fmt.Errorf("cannot connect to provisiond: %w", errors.Join(errs...))
}

// call calls a ModelAdmin method.
func (a *app) call(ctx context.Context, method string, args, result any) error {
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	return c.Call(ctx, facadeName, facadeVersion, "", method, args, result)
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
stderr. Exit status: 0 on success, 1 on failure, 2 on a usage error.`,
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
			for _, sub := range c.Commands() {
				sub.Example = "  provisionctl completion " + sub.Name() + " --help"
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
			return usagef("%s needs %d argument(s) (%v), got %d", cmd.Name(), len(names), names, len(args))
		}
		return nil
	}
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
