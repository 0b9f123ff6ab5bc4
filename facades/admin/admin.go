// Package admin serves the Admin facade, version 3: Login and
// RedirectInfo (specs/rpc.md §3).
//
// Login runs in the caller's handler goroutine; the Session serialises
// logins on one connection (a second one gets "already logged in").
package admin

import (
	"context"
	"fmt"
	"strings"

	"github.com/juju/errors"
	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// Admin is the facade instance of one call.
type Admin struct {
	ctx     *facade.Context
	limiter *Limiter
	// ctrl is the controller's identity, read once per login.
	ctrl state.ControllerIdentity
}

// Register adds Admin v3 to r. Agent logins pass through limiter (nil: no
// limit).
func Register(r *facade.Registry, limiter *Limiter) {
	newF := func(c *facade.Context) (*Admin, error) { return &Admin{ctx: c, limiter: limiter}, nil }
	rpc.Register(r, "Admin", 3, newF, func(m *rpc.Methods[*facade.Context, *Admin]) {
		rpc.Handle(m, "Login", (*Admin).Login)
		rpc.HandleNoArgs(m, "RedirectInfo", (*Admin).RedirectInfo)
	})
}

// RedirectInfo always fails: this controller never redirects (as Juju).
func (a *Admin) RedirectInfo(context.Context) (params.RedirectInfoResult, error) {
	return params.RedirectInfoResult{}, &params.Error{Message: "not redirected"}
}

// Login authenticates the connection as a user or a machine agent.
func (a *Admin) Login(ctx context.Context, req params.LoginRequest) (params.LoginResult, error) {
	s := a.ctx.Session
	if err := s.BeginLogin(); err != nil {
		return params.LoginResult{}, err
	}
	var auth *facade.Auth
	defer func() { s.EndLogin(auth) }()

	if req.AuthTag == "" {
		return params.LoginResult{}, facade.ErrNoCreds
	}
	isUser := strings.HasPrefix(req.AuthTag, names.UserTagKind+"-")
	if !isUser {
		release, ok := a.limiter.Acquire(ctx)
		if !ok {
			return params.LoginResult{}, facade.ErrTryAgain
		}
		defer release()
	}
	tag, err := facade.ParseTag(req.AuthTag)
	if err != nil {
		err = &params.Error{Message: err.Error()}
		a.refused(req.AuthTag, err)
		return params.LoginResult{}, err
	}
	if a.ctrl, err = a.ctx.Deps.State.ControllerIdentity(ctx); err != nil {
		return params.LoginResult{}, fmt.Errorf("cannot read controller: %w", err)
	}
	// Back off after failed logins of this user or agent from this
	// client (throttle.go).
	th := a.limiter.Throttle()
	attempt, wait := th.Begin(a.throttleKeys(tag))
	controllerOnly, throttled := false, wait
	if wait > 0 && a.maybeController(tag) {
		// A hosted model's machine backs off, but the controller agent,
		// who logs in with the same tag, has keys of its own: it is
		// checked alone. Its failures here are not counted, or guesses at
		// the hosted machine would lock the controller agent out; its
		// password is 24 random bytes.
		attempt, wait = th.Begin(th.AgentKeys(a.ctrl.ModelUUID, tag.String(), s.RemoteAddr()).WaitOnly())
		controllerOnly = true
	}
	if wait > 0 {
		err = ThrottledError(wait)
		a.refused(req.AuthTag, err)
		return params.LoginResult{}, err
	}
	// Watch the credentials of whom the login may be before checking
	// them, so a change committed after the check closes the connection.
	watches := map[string]func(){}
	watch := func(kind watcher.Kind, model, id string) {
		watches[model] = s.WatchCredentials(facade.CredentialFilters(kind, model, id))
	}
	var res params.LoginResult
	switch t := tag.(type) {
	case names.UserTag:
		watch(state.KindUser, "", t.Name())
		auth, res, err = a.loginUser(ctx, t, req.Credentials)
	case names.MachineTag:
		watch(state.KindMachine, a.ctx.Model.UUID, t.Id())
		if a.ctrl.ModelUUID != a.ctx.Model.UUID {
			watch(state.KindMachine, a.ctrl.ModelUUID, t.Id())
		}
		auth, res, err = a.loginMachine(ctx, t, req.Credentials, req.Nonce, controllerOnly)
	default:
		// No other kind of entity can log in to provisiond.
		err = facade.ErrBadCreds
	}
	for model, cancel := range watches {
		if err != nil || (auth.Machine != nil && auth.Machine.Model != model) {
			cancel()
		}
	}
	switch {
	case err == facade.ErrBadCreds && controllerOnly:
		// Not the controller agent: refused unchecked as the hosted
		// machine's keys say (a "try again", which its agent retries).
		attempt.Abandon()
		err = ThrottledError(throttled)
	case err == facade.ErrBadCreds: // a wrong password or an unknown entity; not "permission denied"
		attempt.Failed()
	case err == nil && auth.Controller && a.maybeController(tag) && !controllerOnly:
		// The controller agent, checked on the hosted machine's keys:
		// its success is not that machine's, whose failures stand.
		attempt.Abandon()
		err = s.Admit(*auth)
	case err == nil:
		attempt.Succeeded()
		err = s.Admit(*auth)
	default:
		attempt.Abandon()
	}
	if err != nil {
		auth = nil
		a.refused(req.AuthTag, err)
		return params.LoginResult{}, err
	}
	a.ctx.Deps.Logger.Debug("login", "tag", facade.Bounded(req.AuthTag), "model", a.ctx.Model.UUID)
	return res, nil
}

// throttleKeys are the keys the Throttle counts a login's failures under:
// a user's, or the machine's of the connection's model.
func (a *Admin) throttleKeys(tag names.Tag) LoginKeys {
	th, remote := a.limiter.Throttle(), a.ctx.Session.RemoteAddr()
	if t, ok := tag.(names.UserTag); ok {
		return th.UserKeys("api", t.Name(), remote)
	}
	return th.AgentKeys(a.ctx.Model.UUID, tag.String(), remote)
}

// maybeController reports whether a login as tag may be the controller
// agent's visiting a hosted model (loginMachine).
func (a *Admin) maybeController(tag names.Tag) bool {
	_, ok := tag.(names.MachineTag)
	return ok && a.ctrl.ModelUUID != a.ctx.Model.UUID
}

// refused logs a refused login; the tag is the client's, so only its
// first bytes are logged.
func (a *Admin) refused(tag string, err error) {
	// The daemon's audit trail logs every refused login ("login refused",
	// at warn) with the remote address this facade does not know
	// (internal/daemon/audit.go); this is the facade's detail, at debug.
	a.ctx.Deps.Logger.Debug("login not admitted", "tag", facade.Bounded(tag), "code", params.ErrCode(facade.ServerError(err)))
}

func (a *Admin) loginUser(ctx context.Context, t names.UserTag, password string) (*facade.Auth, params.LoginResult, error) {
	if !t.IsLocal() {
		return nil, params.LoginResult{}, facade.ErrBadCreds
	}
	st := a.ctx.Deps.State
	u, err := st.CheckUserPassword(ctx, t.Name(), password)
	if err != nil {
		return nil, params.LoginResult{}, loginError(err)
	}
	modelAccess := ""
	ctrlAccess := "login"
	if u.Access == state.AccessSuperuser {
		ctrlAccess = "superuser"
		modelAccess = "admin"
	}
	// Users other than superusers have no model access records yet, so
	// they may only use the controller endpoint.
	if !a.ctx.ControllerOnly && modelAccess == "" {
		return nil, params.LoginResult{}, facade.ErrPerm
	}
	auth := &facade.Auth{Tag: names.NewUserTag(u.Name), User: &u}
	res := a.result()
	res.UserInfo = &params.AuthUserInfo{
		DisplayName:      u.DisplayName,
		Identity:         names.NewUserTag(u.Name).String(),
		ControllerAccess: ctrlAccess,
		ModelAccess:      modelAccess,
	}
	return auth, res, nil
}

// loginMachine checks a machine agent's credentials; controllerOnly skips
// the machine of a hosted model, whose logins back off, and tries the
// controller agent only.
func (a *Admin) loginMachine(ctx context.Context, t names.MachineTag, password, nonce string, controllerOnly bool) (*facade.Auth, params.LoginResult, error) {
	st := a.ctx.Deps.State
	model := a.ctx.Model
	var m state.MachineLogin
	err := errors.Unauthorizedf("machine %s of model %s backs off", t.Id(), model.UUID)
	if !controllerOnly {
		m, err = st.AuthenticateMachine(ctx, model.UUID, t.Id(), password, nonce)
	}
	onControllerModel := a.ctrl.ModelUUID == model.UUID
	controller := err == nil && m.IsController() && onControllerModel
	if err != nil && !errors.Is(err, errors.NotProvisioned) {
		// Machine ids are per model: a hosted model's machine-0 is tried
		// first, then the controller agent of the controller model. As in
		// Juju (apiserver/stateauthenticator), only a success there counts:
		// its wrong nonce leaves the hosted model's error (bad credentials).
		if !onControllerModel {
			cm, cerr := st.AuthenticateMachine(ctx, a.ctrl.ModelUUID, t.Id(), password, nonce)
			if cerr == nil && cm.IsController() {
				m, err, controller = cm, nil, true
			}
		}
	}
	if err != nil {
		return nil, params.LoginResult{}, loginError(err)
	}
	auth := &facade.Auth{Tag: t, Machine: &facade.AgentMachine{Model: m.Model, ID: m.ID}, Controller: controller}
	res := a.result()
	// The controller agent visiting another model gets no ping timeout
	// (Juju does the same); every other agent must ping.
	if !controller || onControllerModel {
		a.ctx.Session.StartPingTimeout(a.ctx.Deps.PingTimeout)
	}
	return auth, res, nil
}

// loginError hides why a login failed, except "not provisioned".
func loginError(err error) error {
	switch {
	case errors.Is(err, errors.NotProvisioned):
		return &params.Error{Message: err.Error(), Code: params.CodeNotProvisioned}
	case errors.Is(err, errors.Unauthorized), errors.Is(err, errors.NotFound):
		return facade.ErrBadCreds
	}
	return fmt.Errorf("login: %w", err)
}

// Unlisted are the facades served but left out of LoginResult.facades:
//
//   - Admin, as Juju leaves it out: clients log in with Admin v3 before
//     they have a list, and python-libjuju warns about any name it does
//     not expect ("unexpected facade Admin received from the controller").
//   - ModelAdmin, provisiond's own operator facade: no Juju client knows
//     it, so listing it makes python-libjuju warn on every connection,
//     user or agent. provisionctl and rpc/client call it at version 1
//     without reading the list; a superuser can still call it (access is
//     the facade's own check, not the list's).
var Unlisted = map[string]bool{"Admin": true, "ModelAdmin": true}

// listedFacades is the session's facades less Unlisted.
func (a *Admin) listedFacades() []params.FacadeVersions {
	all := a.ctx.Session.Facades()
	out := all[:0:0]
	for _, f := range all {
		if !Unlisted[f.Name] {
			out = append(out, f)
		}
	}
	return out
}

func (a *Admin) result() params.LoginResult {
	d := a.ctx.Deps
	res := params.LoginResult{
		ControllerTag: names.NewControllerTag(a.ctrl.UUID).String(),
		Facades:       a.listedFacades(),
		ServerVersion: d.ServerVersion,
	}
	if !a.ctx.ControllerOnly {
		res.ModelTag = names.NewModelTag(a.ctx.Model.UUID).String()
	}
	if d.APIHostPorts != nil {
		res.Servers = d.APIHostPorts()
	}
	return res
}
