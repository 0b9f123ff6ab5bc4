package facade

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/juju/errors"

	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// Session is the rpc.Root of one connection. Before login only Admin is
// reachable; after a successful Admin.Login every facade the connection
// kind allows.
type Session struct {
	deps           *Deps
	conn           *rpc.Conn
	model          state.Model
	controllerOnly bool
	modelErr       error
	remote         string // the client's address, for logs
	resources      *watcher.Resources
	// laterErr is laterError, bound once: a method value made per call
	// is an allocation per watcher Next.
	laterErr func(rpc.Request, error) error

	mu         sync.Mutex // guards the fields below
	loggingIn  bool
	loggedIn   bool
	auth       Auth
	pingTimer  *time.Timer
	loginTimer *time.Timer
	killed     bool
	onKill     []func() // run by Kill, after the resources stop (session_auth.go)
	// agentCounted: this session counts in Deps.Agents.
	agentCounted bool
	// present: this session's agent is recorded in Deps.Presence.
	present bool
}

// NewRootFunc returns the rpc.Config.NewRoot of provisiond: a Session per
// connection, with the model of the URL resolved once.
func NewRootFunc(deps *Deps) func(rpc.ConnInfo, *rpc.Conn) rpc.Root {
	return func(info rpc.ConnInfo, c *rpc.Conn) rpc.Root {
		s := &Session{deps: deps, conn: c, remote: info.RemoteAddr, resources: watcher.NewResources(deps.MaxWatchers)}
		s.laterErr = s.laterError
		if d := deps.LoginTimeout; d > 0 {
			s.loginTimer = time.AfterFunc(d, func() {
				deps.Logger.Debug("closing connection: no login", "timeout", d, "remote", info.RemoteAddr)
				c.Close(websocket.ClosePolicyViolation)
			})
		}
		// A connection's set-up has no call to answer: its reads are the
		// store's local ones (bbolt's file, etcd's replica), which do not
		// wait on the network.
		ctx := context.Background()
		uuid := info.ModelUUID
		if uuid == "" {
			s.controllerOnly = true
			ctrl, err := deps.State.ControllerIdentity(ctx)
			if err != nil {
				s.modelErr = s.setupError(fmt.Errorf("cannot read controller: %w", err))
				return s
			}
			uuid = ctrl.ModelUUID
		}
		m, err := deps.State.Model(ctx, uuid)
		switch {
		case errors.Is(err, errors.NotFound):
			s.modelErr = &params.Error{Message: fmt.Sprintf("unknown model: %q", info.ModelUUID), Code: params.CodeModelNotFound}
		case err != nil:
			s.modelErr = s.setupError(err)
		default:
			// Its identity only: the config (maps, half a KiB per
			// connection with the same model decoded for each) is read
			// from state by those that need it.
			s.model = state.Model{UUID: m.UUID, Name: m.Name, Type: m.Type, Life: m.Life}
		}
		return s
	}
}

// setupError maps an error of the connection's set-up through the error
// table, logging it as the table says with the connection's address.
func (s *Session) setupError(err error) *params.Error {
	pe, level := toWire(err)
	if level != logNone {
		s.deps.Logger.Log(context.Background(), level, "connection set-up failed", "remote", s.remote, "err", err.Error())
	}
	return boundMessage(pe)
}

// FindMethod implements rpc.Root: the one lookup of a call. It decides
// what the connection may reach (Admin only before login, then the
// registry; controller facades only on /api), finds the method and returns
// it bound to the call's Context.
func (s *Session) FindMethod(req rpc.Request) (rpc.Caller, error) {
	if s.modelErr != nil {
		return nil, s.modelErr
	}
	s.mu.Lock()
	loggedIn, auth := s.loggedIn, s.auth
	s.mu.Unlock()
	if req.Facade == "Admin" {
		if req.Version != 3 {
			return nil, &params.Error{Message: "this version of Juju does not support login from old clients", Code: params.CodeNotSupported}
		}
		if req.ID != "" {
			return nil, ErrBadID
		}
	} else if !loggedIn {
		return nil, rpc.UnknownFacadeError(req.Facade, req.Version)
	}
	m, err := s.deps.Registry.Find(req.Facade, req.Version, req.Method)
	if err != nil {
		return nil, err
	}
	if s.controllerOnly && !ControllerAPIFacades[req.Facade] {
		return nil, &params.Error{
			Message: fmt.Sprintf("facade %q not supported for controller API connection", req.Facade),
			Code:    params.CodeNotSupported,
		}
	}
	return &call{
		Context: Context{
			Deps:           s.deps,
			Session:        s,
			Auth:           auth,
			Model:          &s.model,
			ControllerOnly: s.controllerOnly,
			Resources:      s.resources,
			ID:             req.ID,
			Request:        req,
		},
		method: m,
	}, nil
}

// call is one resolved request: the method, the Context its facade is
// built from, and the context.Context its method runs with (one
// allocation per call for the three).
type call struct {
	Context
	method *rpc.Method[*Context]
	ctx    callContext
}

// callContext is the context.Context a facade method gets: rpc's, through
// which ContextOf finds the call's Context (Bulk logs internal errors with
// it).
type callContext struct {
	context.Context
	c *Context
}

// callResume is state's Resume of a call whose request carried
// provisiond's "from-revision" header key: the watcher it makes resumes
// after it, and its reply carries the revision of the initial event.
type callResume struct{ ctx context.Context }

func (r callResume) From() uint64 {
	from, _ := rpc.FromRevision(r.ctx)
	return from
}

func (r callResume) Covered(rev uint64) { rpc.SetRevision(r.ctx, rev) }

// contextKey finds the call's Context among a context's values.
type contextKey struct{}

// Value implements context.Context. It answers state.OriginKey with the
// call's origin, which the store keeps in the history of each commit the
// call makes: who is logged in, from where, on which daemon, and the call.
func (cc *callContext) Value(key any) any {
	switch key {
	case contextKey{}:
		return cc.c
	case state.OriginKey{}:
		return cc.c.origin()
	case state.ResumeKey{}:
		if _, ok := rpc.FromRevision(cc.Context); ok {
			return callResume{cc.Context}
		}
		return nil
	}
	return cc.Context.Value(key)
}

// origin is the call's state.Origin.
func (c *Context) origin() state.Origin {
	o := state.Origin{Call: c.Request.Facade + "." + c.Request.Method}
	if c.Auth.Tag != nil {
		o.Who = c.Auth.Tag.String()
	}
	if c.Session != nil {
		o.Addr = c.Session.remote
	}
	if c.Deps != nil {
		o.Daemon = c.Deps.ServerID
	}
	return o
}

// ContextOf returns the Context of the call ctx was given to, or nil for
// a context that is no call's (in-process callers, tests).
func ContextOf(ctx context.Context) *Context {
	c, _ := ctx.Value(contextKey{}).(*Context)
	return c
}

// Call implements rpc.Caller: the one call of a request. The method's
// error, or that of a Later reply, goes through the error table.
func (k *call) Call(ctx context.Context, raw json.RawMessage) (any, error) {
	k.ctx = callContext{Context: ctx, c: &k.Context}
	res, err := k.method.Call(&k.ctx, &k.Context, raw)
	if err != nil {
		return nil, k.ServerError(err)
	}
	if l, ok := res.(*rpc.Later); ok {
		return l.MapErr(k.Session.laterErr), nil
	}
	return res, nil
}

// laterError maps the error of a Later call's reply (a watcher's Next) as
// the call's Context.ServerError does, logged with the call's request: the
// call itself (its Context, the facade instance) is not kept while it
// waits, which for an agent's watcher was a fifth of what it held.
func (s *Session) laterError(req rpc.Request, err error) error {
	c := Context{Deps: s.deps, Session: s, Model: &s.model, Request: req}
	return c.ServerError(err)
}

// Kill implements rpc.Root: it stops every resource and the ping timer.
func (s *Session) Kill() {
	s.mu.Lock()
	s.killed = true
	if s.agentCounted {
		s.agentCounted = false
		s.deps.Agents(-1)
	}
	present := s.present
	var agent presence.Agent
	if present {
		agent = s.presenceAgent(s.auth)
		s.present = false
	}
	if s.pingTimer != nil {
		s.pingTimer.Stop()
	}
	if s.loginTimer != nil {
		s.loginTimer.Stop()
	}
	onKill := s.onKill
	s.onKill = nil
	s.mu.Unlock()
	if present {
		s.deps.Presence.Disconnect(agent)
	}
	s.resources.StopAll()
	for _, f := range onKill {
		f()
	}
}

// BeginLogin marks a login as under way; a second login, concurrent or
// later, gets ErrAlreadyLoggedIn. Every BeginLogin that succeeds is
// followed by EndLogin.
func (s *Session) BeginLogin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loggingIn || s.loggedIn {
		return ErrAlreadyLoggedIn
	}
	s.loggingIn = true
	return nil
}

// EndLogin ends the login begun by BeginLogin. With a non-nil auth the
// connection is logged in from now on; with nil the client may try again.
func (s *Session) EndLogin(auth *Auth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loggingIn = false
	if auth != nil {
		s.loggedIn = true
		s.auth = *auth
		if auth.Machine != nil && s.deps.Agents != nil && !s.killed {
			s.agentCounted = true
			s.deps.Agents(1)
		}
		if auth.Machine != nil && s.deps.Presence != nil && !s.killed {
			s.present = true
			s.deps.Presence.Connect(s.presenceAgent(*auth))
		}
		if s.loginTimer != nil {
			s.loginTimer.Stop()
			s.loginTimer = nil // the timer and its closure go: a logged-in connection holds no login timer
		}
	}
}

// presenceAgent is who a machine agent's login makes present: the agent
// of its machine when it logged in to its own model (the controller agent
// on the controller model's endpoint or on /api included), and the
// model's provisioner for the controller agent on a model's endpoint.
// The controller agent visiting another model is not that model's
// machine (Juju records it as a controller agent, which AgentStatus
// leaves out: core/presence).
func (s *Session) presenceAgent(auth Auth) presence.Agent {
	a := presence.Agent{Model: s.model.UUID, Provisioner: auth.Controller && !s.controllerOnly}
	if auth.Machine.Model == s.model.UUID {
		a.Machine = auth.Machine.ID
	}
	return a
}

// StartPingTimeout starts the agent ping timer: if Ping is not called
// within d, the connection is closed (close code 1000, no RPC error).
func (s *Session) StartPingTimeout(d time.Duration) {
	if d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.killed || s.pingTimer != nil {
		return
	}
	s.pingTimer = time.AfterFunc(d, func() {
		s.deps.Logger.Debug("closing agent connection: no ping", "timeout", d)
		s.conn.Close(websocket.CloseNormalClosure)
	})
}

// Ping resets the agent ping timer, if any.
func (s *Session) Ping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pingTimer != nil && !s.killed {
		s.pingTimer.Reset(s.deps.PingTimeout)
	}
}

// StopPingTimeout turns the agent ping timer off (Pinger.Stop).
func (s *Session) StopPingTimeout() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pingTimer != nil {
		s.pingTimer.Stop()
	}
}

// Facades lists the facades this connection may use after login, for
// LoginResult.facades.
func (s *Session) Facades() []params.FacadeVersions {
	all := s.deps.Registry.Facades()
	out := make([]params.FacadeVersions, 0, len(all))
	for _, f := range all {
		if s.controllerOnly && !ControllerAPIFacades[f.Name] {
			continue
		}
		out = append(out, params.FacadeVersions{Name: f.Name, Versions: f.Versions})
	}
	return out
}
