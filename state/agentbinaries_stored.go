package state

import (
	"context"
	"fmt"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/watcher"
)

// AgentBinaryRecord returns the catalog entry of version (a binary
// version such as "3.3.0-ubuntu-amd64"), URL and Stored flag included.
func (st *State) AgentBinaryRecord(ctx context.Context, version string) (AgentBinary, error) {
	var d agentBinaryDoc
	err := st.view(ctx, func(r reader) error {
		ok, err := get(r, KindTools, "", version, &d)
		if err == nil && !ok {
			err = errors.NotFoundf("agent binaries %s", version)
		}
		return err
	})
	return d.AgentBinary, err
}

// AddStoredAgentBinary records that the controller's blob store holds the
// binaries of b.Version with b's SHA-256 and size (b.Stored is set). A
// new version is added (its URL, if any, validated); an entry of the same
// version with the same SHA-256 and size is marked stored, keeping its
// URL (a repeated upload, or a fetch from the entry's URL); one with
// another SHA-256 or size is refused (AlreadyExists): its agents may
// already run those binaries.
func (st *State) AddStoredAgentBinary(ctx context.Context, b AgentBinary) error {
	b.SHA256 = strings.ToLower(b.SHA256)
	b.Stored = true
	if err := ValidateAgentBinary(b); err != nil {
		return err
	}
	return st.update(ctx, func(tx *txn) error {
		var d agentBinaryDoc
		ok, err := get(tx, KindTools, "", b.Version, &d)
		if err != nil {
			return err
		}
		if ok {
			if d.SHA256 != b.SHA256 || d.Size != b.Size {
				return errors.NewAlreadyExists(nil, fmt.Sprintf(
					"agent binaries %s already exist with sha256 %s and size %d", b.Version, d.SHA256, d.Size))
			}
			if d.Stored {
				return errNoChange
			}
			d.Stored = true
			return tx.put(KindTools, "", b.Version, &d)
		}
		return tx.put(KindTools, "", b.Version, &agentBinaryDoc{AgentBinary: b}, watcher.FieldCreated)
	})
}
