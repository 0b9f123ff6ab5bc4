package facade

import (
	"github.com/juju/names/v5"
)

// MachineTag parses tag as a machine tag. Any other tag, or a malformed
// one, is ErrPerm: callers learn nothing about what exists.
func MachineTag(tag string) (names.MachineTag, error) {
	t, err := names.ParseMachineTag(tag)
	if err != nil {
		return names.MachineTag{}, ErrPerm
	}
	return t, nil
}

// RequireMachineAgentOrController refuses callers that are neither machine
// agents nor the controller agent (the Provisioner's rule).
func (c *Context) RequireMachineAgentOrController() error {
	if !c.Auth.IsMachineAgent() {
		return ErrPerm
	}
	return nil
}

// RequireController refuses everyone but the controller agent.
func (c *Context) RequireController() error {
	if !c.Auth.Controller {
		return ErrPerm
	}
	return nil
}

// RequireSuperuser refuses everyone but controller superusers.
func (c *Context) RequireSuperuser() error {
	if !c.Auth.IsSuperuser() {
		return ErrPerm
	}
	return nil
}
