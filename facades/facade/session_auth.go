package facade

import (
	"sync"

	"github.com/gorilla/websocket"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// What a session does about its login beyond Admin.Login's checks:
//
//   - before login the rpc layer reads small messages one at a time
//     (rpc.Authenticator);
//   - a login counts against its entity's connection limit, and the
//     connection's watchers against the entity's watcher limit
//     (EntityLimits);
//   - authorisation is not only checked at login: the connection is closed
//     (code 1008) as soon as its entity's password changes or the entity
//     is removed, so a rotated password stops working everywhere at once,
//     on the connections that logged in with it too.

var _ rpc.Authenticator = (*Session)(nil)

// Authenticated reports whether the connection has logged in.
func (s *Session) Authenticated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loggedIn
}

// RemoteAddr is the client's address (host:port).
func (s *Session) RemoteAddr() string {
	if s.conn == nil {
		return ""
	}
	return s.conn.Info().RemoteAddr
}

// CredentialFilters select the changes that end a login as the machine id
// of model or the user name: a new password, or its removal.
func CredentialFilters(kind watcher.Kind, model, id string) watcher.Filter {
	return watcher.Filter{Kind: kind, Model: model, ID: id, Fields: []string{state.FieldPassword, watcher.FieldRemoved}}
}

// WatchCredentials closes the connection when a change f selects commits
// (see CredentialFilters), or a reset (watcher.Hub.Reset) says one may
// have been missed. Admin.Login subscribes before it checks the
// password, so a change committed after that check is never missed; it
// cancels the watches of the entities it did not log in as. The watch ends
// with the connection.
func (s *Session) WatchCredentials(f watcher.Filter) (cancel func()) {
	stop := s.deps.Hub.Subscribe(f, func(_ uint64, c watcher.Change) {
		why := "closing connection: its entity's credentials changed"
		if c.IsReset() {
			// The feed fell behind the store: a change of the credentials
			// may have been missed, so the login cannot stand.
			why = "closing connection: the change feed was reset, its entity's credentials may have changed"
		}
		s.deps.Logger.Info(why, "kind", c.Kind, "model", c.Model, "id", c.ID, "remote", s.RemoteAddr())
		if s.conn != nil {
			s.conn.Close(websocket.ClosePolicyViolation)
		}
	})
	return s.addOnKill(stop)
}

// Admit counts the connection against the limits of the entity auth logs
// in as (EntityLimits), until the connection ends; over them it returns
// the error the login fails with.
func (s *Session) Admit(auth Auth) error {
	key, counted := EntityKey(auth)
	if !counted {
		return nil
	}
	quota, release, err := s.deps.Entities.admit(key, auth.Tag.String())
	if err != nil {
		return err
	}
	if quota != nil {
		s.resources.Share(quota)
	}
	s.addOnKill(release)
	return nil
}

// addOnKill runs f when the session is killed (at once if it already is),
// and returns a function that runs it earlier, once.
func (s *Session) addOnKill(f func()) func() {
	var o sync.Once
	once := func() { o.Do(f) }
	s.mu.Lock()
	if s.killed {
		s.mu.Unlock()
		once()
		return func() {}
	}
	s.onKill = append(s.onKill, once)
	s.mu.Unlock()
	return once
}
