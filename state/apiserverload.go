package state

import (
	"context"
	"encoding/json"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// KindAPIServerLoad is the kind of the load records of the daemons that
// share a store: one per daemon, kept as a store.Ephemeral key
// ("apiserverload/<server>") under the daemon's lease, so a killed
// daemon's record goes when its lease expires. The daemons read each
// other's to balance the agents between them (internal/daemon's
// balance.go). Each put and removal reaches every daemon's feed as a
// change of this kind, Model "" and ID the server's id.
const KindAPIServerLoad watcher.Kind = "apiserverload"

// APIServerLoad is how many API connections one API server holds and
// whether it takes more.
type APIServerLoad struct {
	// Server is the API server's id (APIServer.ID).
	Server string `json:"server"`
	// Conns is how many API (websocket) connections it holds.
	Conns int `json:"conns"`
	// Draining is true once the server has stopped accepting connections
	// and is handing its own to the others before it stops.
	Draining bool `json:"draining,omitempty"`
}

// PublishAPIServerLoad records l until release is called, the State is
// closed, or the process dies (on etcd, its lease expires). A later call
// for the same server replaces the record; the earlier release then does
// nothing.
func (st *State) PublishAPIServerLoad(ctx context.Context, l APIServerLoad) (release func(), err error) {
	switch {
	case !validServerID(l.Server):
		return nil, errors.NotValidf("API server id %q", l.Server)
	case l.Conns < 0:
		return nil, errors.NotValidf("connection count %d", l.Conns)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return nil, errors.Trace(err)
	}
	release, err = st.store.Ephemeral(ctx, store.Key(string(KindAPIServerLoad), l.Server), b)
	return release, errors.Annotate(err, "publishing the API server's load")
}

// APIServerLoads returns every live load record, in server id order.
func (st *State) APIServerLoads(ctx context.Context) ([]APIServerLoad, error) {
	return listLive[APIServerLoad](ctx, st, KindAPIServerLoad)
}
