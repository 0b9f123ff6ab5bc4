package state

import (
	"context"
	"slices"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/watcher"
)

// AgentBinary is one entry of the controller's agent binaries catalog.
type AgentBinary struct {
	Version string `json:"version"` // "3.3.0-ubuntu-amd64"
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	// URL is where the controller gets the binary from (operators give
	// it); agents are always sent a URL on the controller itself.
	URL string `json:"url,omitempty"`
	// Stored says the controller's blob store holds the binary (uploaded,
	// or fetched from URL and checked); it is served from there.
	Stored bool `json:"stored,omitempty"`
}

type agentBinaryDoc struct {
	AgentBinary
}

// AddAgentBinaries adds (or replaces) catalog entries.
func (st *State) AddAgentBinaries(ctx context.Context, bins ...AgentBinary) error {
	for _, b := range bins {
		if _, err := environ.ParseBinary(b.Version); err != nil {
			return errors.NewNotValid(nil, err.Error())
		}
		if b.Size <= 0 || b.SHA256 == "" {
			return errors.NotValidf("agent binary %q without size or sha256", b.Version)
		}
	}
	return st.update(ctx, func(tx *txn) error {
		for _, b := range bins {
			if err := tx.put(KindTools, "", b.Version, &agentBinaryDoc{AgentBinary: b}, watcher.FieldCreated); err != nil {
				return err
			}
		}
		return nil
	})
}

// AgentBinaries returns the catalog as the provider sees it.
func (st *State) AgentBinaries(ctx context.Context) ([]environ.Tools, error) {
	var out []environ.Tools
	err := st.view(ctx, func(r reader) error {
		docs, err := list[agentBinaryDoc](r, KindTools, "")
		for _, d := range docs {
			v, perr := environ.ParseBinary(d.Version)
			if perr != nil {
				continue
			}
			out = append(out, environ.Tools{Version: v, SHA256: d.SHA256, Size: d.Size})
		}
		return err
	})
	slices.SortFunc(out, func(a, b environ.Tools) int { return a.Version.Compare(b.Version.Number) })
	return out, err
}
