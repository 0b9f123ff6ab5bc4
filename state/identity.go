package state

import (
	"context"
	"encoding/json"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
)

// kindIdentity holds the controller's identity when several daemons share
// one store (etcd): one record, "identity/controller", written by
// Initialize in the same transaction that makes the controller, so two
// daemons starting at once on an empty store make one controller and
// agree on its identity. It is not an entity: it records no change and no
// watcher or ModelAdmin listing sees it. Its secrets are as safe as the
// store is (etcd's TLS and auth): a single-daemon bbolt controller keeps
// its TLS material and passwords in its data dir instead and stores none.
const kindIdentity = "identity"

var identityKey = store.Key(kindIdentity, "controller")

// Identity is what every daemon of a shared-store controller needs to be
// the same controller: the TLS material it presents (every daemon presents
// the same certificate) and the passwords each writes to its own
// credentials.yaml (the stored password hashes, which logins check, are in
// the user and machine records as always).
type Identity struct {
	CACert     []byte `json:"ca-cert"`               // PEM
	CAKey      []byte `json:"ca-key,omitempty"`      // PEM; empty when the operator supplied the certificates
	ServerCert []byte `json:"server-cert,omitempty"` // PEM
	ServerKey  []byte `json:"server-key,omitempty"`  // PEM

	AdminPassword string `json:"admin-password"`
	AgentPassword string `json:"agent-password"`
	AgentNonce    string `json:"agent-nonce"`
}

// Identity returns the controller's stored identity; ok is false when
// there is none (a bbolt controller, or a store not yet initialised).
func (st *State) Identity(ctx context.Context) (id Identity, ok bool, err error) {
	err = st.view(ctx, func(r reader) error {
		var decErr error
		ok, err = r.GetFunc(identityKey, func(b []byte) { decErr = json.Unmarshal(b, &id) })
		if err != nil {
			return errors.Trace(err)
		}
		return errors.Annotate(decErr, "decoding the controller identity")
	})
	return id, ok, err
}

// SetIdentity replaces the stored identity (an operator resetting the admin
// password of a shared-store controller, provisiond migrate).
func (st *State) SetIdentity(ctx context.Context, id Identity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return errors.Trace(err)
	}
	return st.update(ctx, func(tx *txn) error {
		if _, err := getController(tx); err != nil {
			return err
		}
		return tx.Put(identityKey, b)
	})
}

// putIdentity stores id in Initialize's transaction.
func (tx *txn) putIdentity(id *Identity) error {
	if id == nil {
		return nil
	}
	if id.AdminPassword == "" || id.AgentPassword == "" || id.AgentNonce == "" || len(id.CACert) == 0 {
		return errors.NotValidf("controller identity without passwords or CA certificate")
	}
	b, err := json.Marshal(id)
	if err != nil {
		return errors.Trace(err)
	}
	return errors.Trace(tx.Put(identityKey, b))
}
