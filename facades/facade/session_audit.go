package facade

// AuthTag is the tag logged in on the connection ("" before a login
// succeeds), for the daemon's audit trail.
func (s *Session) AuthTag() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.auth.Tag == nil {
		return ""
	}
	return s.auth.Tag.String()
}

// ModelUUID is the connection's model ("" when it did not resolve).
func (s *Session) ModelUUID() string { return s.model.UUID }
