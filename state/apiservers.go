package state

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// KindAPIServer is the kind of the live API servers: one record per running
// daemon, kept as a store.Ephemeral key ("apiserver/<id>"), so it goes when
// its daemon stops or dies (on etcd when its lease expires; on bbolt when the
// next Open finds it left by a process that died). Its puts and removals
// reach the feed as changes of this kind, with watcher.FieldCreated or
// watcher.FieldRemoved, Model "" and ID the server's id.
const KindAPIServer watcher.Kind = "apiserver"

// APIServer is one live API server (daemon) of the controller.
type APIServer struct {
	// ID names the server among the live ones; it is new at each start.
	ID string `json:"id"`
	// Addresses are the host:port addresses agents reach it on.
	Addresses []HostPort `json:"addresses"`
	// Version is the server's build version.
	Version string `json:"version,omitempty"`
	// Started is when it started serving.
	Started time.Time `json:"started"`
}

// maxAPIServerID bounds a server id (it is part of a store key).
const maxAPIServerID = 128

// validServerID reports whether id may name an API server in a store key.
func validServerID(id string) bool {
	return id != "" && len(id) <= maxAPIServerID && !strings.ContainsAny(id, "/\x00")
}

// listLive returns every record of an ephemeral kind (the daemons' own
// records: presence, loads), in key order.
func listLive[T any](ctx context.Context, st *State, kind watcher.Kind) ([]T, error) {
	var out []T
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = list[T](r, kind, "")
		return err
	})
	return out, err
}

// RegisterAPIServer records s as a live API server until release is
// called, the State is closed, or the process dies. Agents learn every
// live server's addresses from APIHostPorts (LoginResult.servers, the
// Provisioner's APIAddresses and APIHostPorts) and WatchAPIHostPorts fires
// when one comes or goes.
func (st *State) RegisterAPIServer(ctx context.Context, s APIServer) (release func(), err error) {
	switch {
	case !validServerID(s.ID):
		return nil, errors.NotValidf("API server id %q", s.ID)
	case len(s.Addresses) == 0:
		return nil, errors.NotValidf("API server %q without addresses", s.ID)
	}
	for _, hp := range s.Addresses {
		if hp.Value == "" || hp.Port <= 0 || hp.Port > 65535 {
			return nil, errors.NotValidf("API address %q port %d", hp.Value, hp.Port)
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, errors.Trace(err)
	}
	release, err = st.store.Ephemeral(ctx, store.Key(string(KindAPIServer), s.ID), b)
	return release, errors.Annotate(err, "registering the API server")
}

// APIServers returns the live API servers, in id order.
func (st *State) APIServers(ctx context.Context) ([]APIServer, error) {
	var out []APIServer
	err := st.view(ctx, func(r reader) error {
		var err error
		out, err = apiServers(r)
		return err
	})
	return out, err
}

func apiServers(r reader) ([]APIServer, error) {
	var out []APIServer
	err := scan(r, string(KindAPIServer)+"/", func(key string, b []byte) error {
		var s APIServer
		if err := json.Unmarshal(b, &s); err != nil {
			return errors.Annotatef(err, "decoding API server %q", store.Rest(key))
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// APIHostPorts returns the API server addresses, one slice per live server
// (RegisterAPIServer), in server id order. Where no server has registered
// (a State used without a daemon), it is what SetAPIHostPorts stored.
func (st *State) APIHostPorts(ctx context.Context) ([][]HostPort, error) {
	var servers [][]HostPort
	err := st.view(ctx, func(r reader) error {
		live, err := apiServers(r)
		if err != nil {
			return err
		}
		for _, s := range live {
			servers = append(servers, slices.Clone(s.Addresses))
		}
		if len(servers) > 0 {
			return nil
		}
		var d apiHostPortsDoc
		_, err = get(r, KindController, "", APIHostPortsID, &d)
		servers = d.Servers
		return err
	})
	return servers, err
}

// apiHostPortsFields is the Fields of WatchAPIHostPorts's filter, shared
// by every such watcher (the hub only reads them; a literal in the call
// was an allocation each watcher held).
var apiHostPortsFields = []string{FieldAPIHostPorts}

// WatchAPIHostPorts fires when the API addresses change after the call: a
// server comes or goes, or the stored addresses change (the caller reads
// them itself: what was committed before the call returned does not fire
// it). It resumes (resumeNotify).
func (st *State) WatchAPIHostPorts(ctx context.Context) (*watcher.Notify, error) {
	w := watcher.NewNotify()
	fs := []watcher.Filter{
		{Kind: KindController, ID: APIHostPortsID, Fields: apiHostPortsFields},
		{Kind: KindAPIServer},
	}
	s := st.subscribeStamped(w, w.Sink(), fs...)
	st.stampNow(ctx, s)
	if err := st.resumeNotify(ctx, s, w, fs...); err != nil {
		_ = w.Stop()
		return nil, err
	}
	return w, nil
}
