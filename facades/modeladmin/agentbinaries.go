package modeladmin

import (
	"context"
	"fmt"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func registerAgentBinaries(m *methods) {
	rpc.Handle(m, "AddAgentBinaries", (*ModelAdmin).AddAgentBinaries)
	rpc.HandleNoArgs(m, "AgentBinaries", (*ModelAdmin).AgentBinaries)
}

// AddAgentBinaries adds one entry to the controller's agent binaries
// catalog, which the Provisioner's FindTools and Tools serve: version
// number, OS (or 2015 series) and architecture make "3.3.0-ubuntu-amd64".
// The URL is where the binary comes from (http or https), with its
// SHA-256 (64 hex digits) and size in bytes. A version already in the
// catalog is refused.
func (a *ModelAdmin) AddAgentBinaries(ctx context.Context, args params.AddAgentBinariesArgs) (params.AgentBinaryInfo, error) {
	if _, err := environ.ParseNumber(args.Version); err != nil {
		return params.AgentBinaryInfo{}, errors.NewNotValid(nil, err.Error()+": want a version number such as 3.3.0")
	}
	if args.OS == "" || args.Arch == "" {
		return params.AgentBinaryInfo{}, errors.NewNotValid(nil, "agent binaries need an OS and an architecture")
	}
	b := state.AgentBinary{Version: fmt.Sprintf("%s-%s-%s", args.Version, args.OS, args.Arch),
		URL: args.URL, SHA256: args.SHA256, Size: args.Size}
	if err := a.st.AddAgentBinary(ctx, b); err != nil {
		return params.AgentBinaryInfo{}, err
	}
	cat, err := a.st.AgentBinaryCatalog(ctx)
	if err != nil {
		return params.AgentBinaryInfo{}, err
	}
	for _, c := range cat {
		if c.Version == b.Version {
			return agentBinaryInfo(c), nil
		}
	}
	return params.AgentBinaryInfo{}, errors.NotFoundf("agent binaries %s", b.Version)
}

func agentBinaryInfo(b state.AgentBinary) params.AgentBinaryInfo {
	return params.AgentBinaryInfo{Version: b.Version, URL: b.URL, SHA256: b.SHA256, Size: b.Size, Stored: b.Stored}
}

// AgentBinaries lists the catalog, sorted by version.
func (a *ModelAdmin) AgentBinaries(ctx context.Context) (params.AgentBinariesResult, error) {
	cat, err := a.st.AgentBinaryCatalog(ctx)
	if err != nil {
		return params.AgentBinariesResult{}, err
	}
	out := params.AgentBinariesResult{AgentBinaries: make([]params.AgentBinaryInfo, len(cat))}
	for i, b := range cat {
		out.AgentBinaries[i] = agentBinaryInfo(b)
	}
	return out, nil
}
