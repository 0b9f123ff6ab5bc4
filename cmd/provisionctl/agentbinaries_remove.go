package main

import (
	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// agentBinaryDoc is an entry of the catalog as provisionctl prints it in
// json and yaml: its size is a count of bytes, so the key says so.
type agentBinaryDoc struct {
	Version   string `json:"version"`
	URL       string `json:"url"`
	SHA256    string `json:"sha256"`
	SizeBytes int64  `json:"size-bytes"`
	// Stored is true once the controller holds the tarball.
	Stored bool `json:"stored"`
}

func agentBinaryDocOf(b params.AgentBinaryInfo) agentBinaryDoc {
	return agentBinaryDoc{Version: b.Version, URL: b.URL, SHA256: b.SHA256, SizeBytes: b.Size, Stored: b.Stored}
}

type agentBinariesDoc struct {
	AgentBinaries []agentBinaryDoc `json:"agent-binaries"`
}

func agentBinariesDocOf(r params.AgentBinariesResult) agentBinariesDoc {
	out := agentBinariesDoc{AgentBinaries: []agentBinaryDoc{}}
	for _, b := range r.AgentBinaries {
		out.AgentBinaries = append(out.AgentBinaries, agentBinaryDocOf(b))
	}
	return out
}

func (a *app) removeAgentBinariesCommand() *cobra.Command {
	var format formatFlag
	cmd := &cobra.Command{
		Use:     "remove-agent-binaries VERSION-OS-ARCH",
		GroupID: "machines",
		Short:   "Remove agent binaries from the controller's catalog",
		Long: `Remove one entry of the controller's catalog of agent binaries, named as
agent-binaries lists it (3.3.0-ubuntu-amd64). Agents already running keep
their binaries; provisioners no longer find that version for new machines.

With --format json or yaml it prints what changed (removed.agent-binaries)
with the removed entry as result; with the table format a message on
stderr.`,
		Example: `  provisionctl remove-agent-binaries 3.3.0-ubuntu-amd64
  provisionctl remove-agent-binaries 3.2.4-ubuntu-arm64 --format json`,
		Args:              exactArgs("VERSION-OS-ARCH"),
		ValidArgsFunction: firstArg(a.completer(a.agentBinaryVersions)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var res params.AgentBinaryInfo
			if err := a.call(cmd.Context(), "RemoveAgentBinaries", params.RemoveAgentBinariesArgs{Version: pos[0]}, &res); err != nil {
				return err
			}
			m := newMutation().removed("agent-binaries", res.Version).result(agentBinaryDocOf(res))
			return a.writeMutation(cmd.Context(), format, "", m, func() {
				a.infof("Removed agent binaries %s.", res.Version)
			})
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}
