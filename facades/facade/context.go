package facade

import (
	"context"
	"log/slog"
	"time"

	"github.com/juju/names/v5"

	"github.com/provisiond/provisiond/environ"
	"github.com/provisiond/provisiond/internal/presence"
	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// Registry is the method registry of provisiond's facades.
type Registry = rpc.Registry[*Context]

// Deps are the long-lived dependencies every facade may use; cmd builds
// them once and shares them between connections.
type Deps struct {
	State *state.State
	// Hub is the state's watcher hub, for watches that are not state's
	// Watch* methods (Session.WatchCredentials).
	Hub      *watcher.Hub
	Registry *Registry
	Logger   *slog.Logger
	// ServerVersion is the Juju API level reported at login ("3.3.0").
	ServerVersion string
	// APIHostPorts lists the addresses reported in LoginResult.servers.
	APIHostPorts func() [][]params.HostPort
	// PingTimeout closes an agent connection that has not pinged for this
	// long (Juju: 3 minutes).
	PingTimeout time.Duration
	// MaxWatchers bounds the resources of one connection (0: no limit).
	MaxWatchers int
	// Entities bounds the connections and watchers of one entity across
	// its connections (nil: no limit).
	Entities *EntityLimits
	// LoginTimeout closes a connection that has not logged in within it
	// (0: never).
	LoginTimeout time.Duration
	// Environ is the built-in provider (networking, agent binaries); the
	// Provisioner needs it. One per daemon: it holds allocation state.
	Environ *environ.Provider
	// Clock drives timer watchers (machine error retry, start-time
	// batching); tests use a fake one. nil: watcher.WallClock.
	Clock watcher.Clock
	// Agents, if set, counts the connections logged in as machine agents
	// (the controller agent's included): +1 when a login succeeds, -1
	// when that connection's session ends. For metrics.
	Agents func(delta int)
	// Presence, if set, records the agents logged in (machine agents and
	// the controller agent): a connection is recorded when its login
	// succeeds, until its session ends. ModelAdmin's Status reads it.
	Presence *presence.Recorder
	// ServerID names this daemon in the history of commits (the origin
	// of each call's writes; "" in tests).
	ServerID string
	// History, if set, reports the history of commits kept and the
	// retention (show-controller).
	History func(ctx context.Context) (state.HistoryStats, string, error)
}

// WatcherClock returns d.Clock, or the wall clock.
func (d *Deps) WatcherClock() watcher.Clock {
	if d.Clock == nil {
		return watcher.WallClock
	}
	return d.Clock
}

// Auth is who is logged in on a connection.
type Auth struct {
	Tag names.Tag
	// User is set for user logins.
	User *state.User
	// Machine is set for machine agent logins: the machine in the
	// connection's model, or the controller machine of the controller model.
	Machine *AgentMachine
	// Controller is true for the controller agent (a machine with
	// JobManageModel in the controller model).
	Controller bool
}

// AgentMachine is the machine a machine agent logged in as: what
// authorization needs of it, held for the connection's life (not the
// whole record, which the facades read from state).
type AgentMachine struct {
	Model string // its model's UUID
	ID    string
}

// IsUser reports a user login.
func (a Auth) IsUser() bool { return a.User != nil }

// IsSuperuser reports a user with controller superuser access.
func (a Auth) IsSuperuser() bool { return a.User != nil && a.User.Access == state.AccessSuperuser }

// IsMachineAgent reports a machine agent login (the controller included).
func (a Auth) IsMachineAgent() bool { return a.Machine != nil }

// Context is what a facade constructor gets for one call.
type Context struct {
	Deps    *Deps
	Session *Session
	// Auth is the connection's login; zero for Admin calls before login.
	Auth Auth
	// Model is the connection's model: the model of the URL, or the
	// controller model for a controller-only (/api) connection. It is its
	// identity (UUID, name, type, life) as it was when the connection was
	// made, without Config: read the model from state for that. It is
	// the session's, shared by its calls: read it, never change it (a
	// pointer keeps a call's Context, made per call, in a smaller size
	// class).
	Model *state.Model
	// ControllerOnly is true on /api and / connections.
	ControllerOnly bool
	// Resources are the connection's watchers.
	Resources *watcher.Resources
	// ID is the request's "id" field (the watcher id for watcher facades).
	ID string
	// Request is the request this call answers: its id and the names that
	// routed it (for logs).
	Request rpc.Request
}

// ControllerAPIFacades are the facades served on controller-only (/api)
// connections; the others need a model endpoint.
var ControllerAPIFacades = map[string]bool{
	"Admin":          true,
	"Pinger":         true,
	"NotifyWatcher":  true,
	"StringsWatcher": true,
	"ModelAdmin":     true,
}
