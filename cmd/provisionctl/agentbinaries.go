package main

import (
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about the agent binaries catalog: add-agent-binaries,
// agent-binaries.
func (a *app) addAgentBinariesCommands(root *cobra.Command) {
	root.AddCommand(a.addAgentBinariesCommand(), a.agentBinariesCommand())
}

func (a *app) addAgentBinariesCommand() *cobra.Command {
	var (
		format formatFlag
		args   params.AddAgentBinariesArgs
	)
	cmd := &cobra.Command{
		Use:     "add-agent-binaries VERSION --os OS --arch ARCH --url URL --sha256 HEX --size N",
		GroupID: "machines",
		Short:   "Add agent binaries to the controller's catalog",
		Long: `Add one entry to the controller's catalog of agent binaries, which
provisioners find with FindTools and machine agents with Tools: VERSION
(3.3.0) for an OS (ubuntu; 2015 agents use a series such as trusty) and an
architecture (amd64, arm64, ppc64el, s390x, riscv64), fetched from URL
(http or https), with its SHA-256 (64 hex digits) and size in bytes. Every
flag is required. A version already in the catalog is refused.

With --format json or yaml it prints the entry; with the table format a
message on stderr.`,
		Example: `  provisionctl add-agent-binaries 3.3.0 --os ubuntu --arch amd64 \
      --url https://example.com/juju-3.3.0-ubuntu-amd64.tgz \
      --sha256 "$(sha256sum juju-3.3.0-ubuntu-amd64.tgz | cut -d' ' -f1)" \
      --size "$(stat -c %s juju-3.3.0-ubuntu-amd64.tgz)"`,
		Args: exactArgs("VERSION"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			args.Version = pos[0]
			var res params.AgentBinaryInfo
			if err := a.call(cmd.Context(), "AddAgentBinaries", args, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(io.Writer) error {
				a.infof("Added agent binaries %s.", res.Version)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&args.OS, "os", "", "the OS (ubuntu) or 2015 series (trusty)")
	cmd.Flags().StringVar(&args.Arch, "arch", "", "the architecture (amd64, arm64, ...)")
	cmd.Flags().StringVar(&args.URL, "url", "", "where the controller gets the binaries (http or https)")
	cmd.Flags().StringVar(&args.SHA256, "sha256", "", "SHA-256 of the binaries, 64 hex digits")
	cmd.Flags().Int64Var(&args.Size, "size", 0, "size of the binaries in bytes")
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) agentBinariesCommand() *cobra.Command {
	var format formatFlag
	cmd := &cobra.Command{
		Use:     "agent-binaries",
		GroupID: "machines",
		Short:   "List the agent binaries catalog",
		Long: `List the controller's catalog of agent binaries, sorted by version: version,
size in bytes, the start of the SHA-256 and the source URL. json and yaml
show the whole SHA-256.`,
		Example: `  provisionctl agent-binaries
  provisionctl agent-binaries --format json | jq -r '."agent-binaries"[].version'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res params.AgentBinariesResult
			if err := a.call(cmd.Context(), "AgentBinaries", nil, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(w io.Writer) error {
				if len(res.AgentBinaries) == 0 {
					a.infof("No agent binaries.")
					return nil
				}
				t := table{header: []string{"VERSION", "SIZE", "SHA256", "URL"}}
				for _, b := range res.AgentBinaries {
					sum := b.SHA256
					if len(sum) > 12 {
						sum = sum[:12] + "..."
					}
					t.add(b.Version, strconv.FormatInt(b.Size, 10), sum, orDash(b.URL))
				}
				return t.write(w)
			})
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}
