package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/provisiond/provisiond/state"
)

// Cookies. The __Host- prefix makes the browser refuse them unless they
// are Secure, have Path=/ and no Domain: neither another host of the
// domain nor a plain-HTTP page can set or shadow them.
const (
	sessionCookie = "__Host-provisiond-session"
	csrfCookie    = "__Host-provisiond-login"
)

// Why a session or a stream ended (the "bye" event tells the page).
const (
	reasonLogout      = "logout"
	reasonExpired     = "expired"
	reasonCredentials = "credentials changed"
	reasonReplaced    = "replaced by a newer session"
	reasonShutdown    = "shutdown"
	reasonStreams     = "replaced by a newer stream"
)

// errTooManySessions refuses a login while MaxSessions are open.
var errTooManySessions = errors.New("too many dashboard sessions are open; try again later")

// session is one login.
type session struct {
	key     string // hex SHA-256 of the cookie's token: the map key
	user    state.User
	csrf    string // the token logout and other POSTs must carry
	created time.Time
	expires time.Time
	remote  string

	// done is closed when the session ends; reason says why. Both are
	// guarded by sessions.mu until done is closed, then read-only.
	done   chan struct{}
	reason string

	// Guarded by sessions.mu.
	lastSeen time.Time
	streams  []*streamSlot // oldest first
	ended    bool
}

// streamSlot is a session's hold on one open stream.
type streamSlot struct {
	done   chan struct{} // closed when the session takes the slot back
	reason string        // set before done is closed
}

// sessions is the in-memory session table.
type sessions struct {
	cfg *Config

	mu     sync.Mutex
	byKey  map[string]*session
	byUser map[string][]*session // oldest first
	// gen counts each user's credential changes, so a login whose
	// password check raced with a change is not kept.
	gen map[string]uint64
}

func newSessions(cfg *Config) *sessions {
	return &sessions{cfg: cfg, byKey: map[string]*session{}, byUser: map[string][]*session{}, gen: map[string]uint64{}}
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func tokenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func tokensEqual(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// generation is the user's credential generation, read before checking
// the password; add refuses a session if it moved since.
func (s *sessions) generation(user string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen[user]
}

// add makes a session for u and returns it with its cookie token. The
// oldest session of the user ends when it has MaxSessionsPerUser.
func (s *sessions) add(u state.User, remote string, gen uint64) (*session, string, error) {
	now := s.cfg.Now()
	token := randomToken()
	sess := &session{
		key: tokenKey(token), user: u, csrf: randomToken(), created: now,
		expires: now.Add(s.cfg.SessionLifetime), lastSeen: now, remote: remote, done: make(chan struct{}),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen[u.Name] != gen {
		return nil, "", errCredentialsChanged
	}
	s.sweepLocked(now)
	if len(s.byKey) >= s.cfg.MaxSessions {
		return nil, "", errTooManySessions
	}
	for len(s.byUser[u.Name]) >= s.cfg.MaxSessionsPerUser {
		s.endLocked(s.byUser[u.Name][0], reasonReplaced)
	}
	s.byKey[sess.key] = sess
	s.byUser[u.Name] = append(s.byUser[u.Name], sess)
	return sess, token, nil
}

var errCredentialsChanged = errors.New("the user's credentials changed during the login; log in again")

// lookup returns the live session of token and marks it seen.
func (s *sessions) lookup(token string) (*session, bool) {
	if token == "" {
		return nil, false
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.byKey[tokenKey(token)]
	if sess == nil {
		return nil, false
	}
	if !s.liveLocked(sess, now) {
		s.endLocked(sess, reasonExpired)
		return nil, false
	}
	sess.lastSeen = now
	return sess, true
}

// fromRequest is the session of r's cookie.
func (s *sessions) fromRequest(r *http.Request) (*session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	return s.lookup(c.Value)
}

// liveLocked: sess has neither reached its lifetime nor idled out. A
// session with an open stream is not idle.
func (s *sessions) liveLocked(sess *session, now time.Time) bool {
	if sess.ended || !now.Before(sess.expires) {
		return false
	}
	return len(sess.streams) > 0 || now.Sub(sess.lastSeen) < s.cfg.SessionIdle
}

// check reports whether sess is still live, ending it if it has expired;
// streams call it on every tick (and so keep it from idling out).
func (s *sessions) check(sess *session) bool {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.ended {
		return false
	}
	if !s.liveLocked(sess, now) {
		s.endLocked(sess, reasonExpired)
		return false
	}
	sess.lastSeen = now
	return true
}

// end ends sess (logout).
func (s *sessions) end(sess *session, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(sess, reason)
}

func (s *sessions) endLocked(sess *session, reason string) {
	if sess.ended {
		return
	}
	sess.ended = true
	sess.reason = reason
	delete(s.byKey, sess.key)
	list := slices.DeleteFunc(s.byUser[sess.user.Name], func(o *session) bool { return o == sess })
	if len(list) == 0 {
		delete(s.byUser, sess.user.Name)
	} else {
		s.byUser[sess.user.Name] = list
	}
	close(sess.done)
}

// sweepLocked ends every session past its time.
func (s *sessions) sweepLocked(now time.Time) {
	for _, sess := range s.byKey {
		if !s.liveLocked(sess, now) {
			s.endLocked(sess, reasonExpired)
		}
	}
}

// credentialsChanged ends every session of user (its password changed,
// or it was removed). It runs on the hub's publisher: it only takes mu.
func (s *sessions) credentialsChanged(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if user == "" { // every user's (a reset of the change feed)
		for name := range s.byUser {
			s.gen[name]++
		}
		for _, sess := range s.byKey {
			s.endLocked(sess, reasonCredentials)
		}
		return
	}
	s.gen[user]++
	for _, sess := range slices.Clone(s.byUser[user]) {
		s.endLocked(sess, reasonCredentials)
	}
}

// closeAll ends every session.
func (s *sessions) closeAll(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.byKey {
		s.endLocked(sess, reason)
	}
}

// openStream takes a stream slot of sess, ending its oldest stream when it
// holds MaxStreamsPerSession. release gives the slot back.
func (s *sessions) openStream(sess *session) (slot *streamSlot, release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess.ended {
		return nil, nil, false
	}
	for len(sess.streams) >= s.cfg.MaxStreamsPerSession {
		old := sess.streams[0]
		sess.streams = sess.streams[1:]
		old.reason = reasonStreams
		close(old.done)
	}
	slot = &streamSlot{done: make(chan struct{})}
	sess.streams = append(sess.streams, slot)
	return slot, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(sess.streams, slot); i >= 0 {
			sess.streams = slices.Delete(sess.streams, i, i+1)
			sess.lastSeen = s.cfg.Now()
		}
	}, true
}

// counts returns the number of sessions, and of streams, open (tests).
func (s *sessions) counts() (sessions, streams int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sess := range s.byKey {
		streams += len(sess.streams)
	}
	return len(s.byKey), streams
}
