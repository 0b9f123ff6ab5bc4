package state

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/watcher"
)

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidateAgentBinary checks a catalog entry as an operator gives it: a
// binary version ("3.3.0-ubuntu-amd64") of a known architecture, a
// SHA-256 of 64 lowercase hex digits, a positive size, and an absolute
// http or https URL (optional for an entry the controller stores).
func ValidateAgentBinary(b AgentBinary) error {
	v, err := environ.ParseBinary(b.Version)
	if err != nil {
		return errors.NewNotValid(nil, err.Error())
	}
	if err := ValidateArch(v.Arch); err != nil {
		return err
	}
	if !sha256Hex.MatchString(b.SHA256) {
		return errors.NewNotValid(nil, fmt.Sprintf("sha256 %q is not 64 lowercase hex digits", b.SHA256))
	}
	if b.Size <= 0 {
		return errors.NewNotValid(nil, fmt.Sprintf("size %d is not positive", b.Size))
	}
	if b.Stored && b.URL == "" {
		return nil
	}
	u, err := url.Parse(b.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.NewNotValid(nil, fmt.Sprintf("url %q is not an absolute http or https URL", b.URL))
	}
	return nil
}

// AddAgentBinary adds one entry to the agent binaries catalog
// (ValidateAgentBinary), refusing a version that is already there
// (AlreadyExists). AddAgentBinaries, by contrast, replaces.
func (st *State) AddAgentBinary(ctx context.Context, b AgentBinary) error {
	b.SHA256 = strings.ToLower(b.SHA256)
	if err := ValidateAgentBinary(b); err != nil {
		return err
	}
	return st.update(ctx, func(tx *txn) error {
		if ok, err := exists(tx, KindTools, "", b.Version); err != nil {
			return err
		} else if ok {
			return errors.AlreadyExistsf("agent binaries %s", b.Version)
		}
		return tx.put(KindTools, "", b.Version, &agentBinaryDoc{AgentBinary: b}, watcher.FieldCreated)
	})
}

// AgentBinaryCatalog returns the catalog's records, URLs included, sorted
// by version number, then by the whole version.
func (st *State) AgentBinaryCatalog(ctx context.Context) ([]AgentBinary, error) {
	var docs []agentBinaryDoc
	err := st.view(ctx, func(r reader) error {
		var err error
		docs, err = list[agentBinaryDoc](r, KindTools, "")
		return err
	})
	out := make([]AgentBinary, len(docs))
	for i, d := range docs {
		out[i] = d.AgentBinary
	}
	slices.SortStableFunc(out, func(a, b AgentBinary) int {
		va, errA := environ.ParseBinary(a.Version)
		vb, errB := environ.ParseBinary(b.Version)
		if errA == nil && errB == nil {
			if c := va.Compare(vb.Number); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Version, b.Version)
	})
	return out, err
}
