// Package pinger serves the Pinger facade, version 1. For agent logins Ping
// resets the connection's ping timeout; for users it does nothing.
package pinger

import (
	"context"

	"github.com/provisiond/provisiond/facades/facade"
	"github.com/provisiond/provisiond/rpc"
)

// Pinger is the facade instance of one call.
type Pinger struct{ ctx *facade.Context }

// Register adds Pinger v1 to r.
func Register(r *facade.Registry) {
	newF := func(c *facade.Context) (*Pinger, error) { return &Pinger{ctx: c}, nil }
	rpc.Register(r, "Pinger", 1, newF, func(m *rpc.Methods[*facade.Context, *Pinger]) {
		rpc.HandleNone(m, "Ping", (*Pinger).Ping)
		rpc.HandleNone(m, "Stop", (*Pinger).Stop)
	})
}

// Ping keeps an agent connection alive.
func (p *Pinger) Ping(context.Context) error {
	p.ctx.Session.Ping()
	return nil
}

// Stop turns the agent ping timeout off.
func (p *Pinger) Stop(context.Context) error {
	p.ctx.Session.StopPingTimeout()
	return nil
}
