package facade

import "github.com/provisiond/provisiond/rpc"

// The rpc layer reads small messages one at a time on a connection that
// has not logged in (rpc.Authenticator).
var _ rpc.Authenticator = (*Session)(nil)

// Authenticated reports whether the connection has logged in.
func (s *Session) Authenticated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loggedIn
}
