package state

import (
	"context"
	"encoding/json"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// KindPresence is the kind of the agent presence records of the daemons
// that share a store: one per daemon and model, kept as a store.Ephemeral
// key ("presence/<server>/<model>") under the daemon's lease, so a killed
// daemon's records go when its lease expires. Each put and removal reaches
// every daemon's feed as a change of this kind, Model "" and ID
// "<server>/<model>" (internal/presence, internal/daemon's presence.go).
const KindPresence watcher.Kind = "presence"

// PresenceRecord is the agents of one model connected to one API server.
type PresenceRecord struct {
	// Server is the API server's id (APIServer.ID).
	Server string `json:"server"`
	Model  string `json:"model"`
	// Machines are the ids of the model's machines whose agent is
	// connected to the server.
	Machines []string `json:"machines,omitempty"`
	// Provisioner is true while the controller agent is logged in to the
	// server at the model's endpoint.
	Provisioner bool `json:"provisioner,omitempty"`
}

// PublishPresence records rec until release is called, the State is
// closed, or the process dies (on etcd, its lease expires). A later call
// for the same server and model replaces the record; the earlier release
// then does nothing.
func (st *State) PublishPresence(ctx context.Context, rec PresenceRecord) (release func(), err error) {
	switch {
	case !validServerID(rec.Server):
		return nil, errors.NotValidf("API server id %q", rec.Server)
	case !IsValidUUID(rec.Model):
		return nil, errors.NotValidf("model UUID %q", rec.Model)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, errors.Trace(err)
	}
	release, err = st.store.Ephemeral(ctx, store.Key(string(KindPresence), rec.Server+"/"+rec.Model), b)
	return release, errors.Annotate(err, "publishing agent presence")
}

// PresenceRecords returns every live presence record, in key order.
func (st *State) PresenceRecords(ctx context.Context) ([]PresenceRecord, error) {
	return listLive[PresenceRecord](ctx, st, KindPresence)
}
