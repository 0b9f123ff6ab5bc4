package facade

import (
	"github.com/juju/names/v5"
)

// MachineTag parses tag as a machine tag. Any other tag, or a malformed
// one, is ErrPerm: callers learn nothing about what exists.
func MachineTag(tag string) (names.MachineTag, error) {
	t, err := ParseMachineTag(tag)
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

// IsModelMachine reports whether the caller is a machine agent of the
// connection's own model (the controller agent visiting a hosted model is
// not: its machine 0 is another model's).
func (c *Context) IsModelMachine() bool {
	return c.Auth.Machine != nil && c.Auth.Machine.Model == c.Model.UUID
}

// CanAccessMachine is the Provisioner's canAccess rule
// (specs/provisioner.md §1.2): a machine agent reaches itself and its
// direct containers; the controller agent reaches top-level machines;
// nothing else (other kinds of tags, grandchildren) is reachable.
func (c *Context) CanAccessMachine(tag names.Tag) bool {
	own := c.IsModelMachine()
	if own && tag == c.Auth.Tag {
		return true
	}
	mt, ok := tag.(names.MachineTag)
	if !ok {
		return false
	}
	parent := mt.Parent()
	if parent == nil {
		return c.Auth.Controller
	}
	return own && parent == c.Auth.Tag
}

// IsOwner is Juju's AuthOwner: the tag is the caller itself (a machine
// of the connection's model).
func (c *Context) IsOwner(tag names.Tag) bool {
	return c.IsModelMachine() && tag == c.Auth.Tag
}
