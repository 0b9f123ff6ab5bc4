package state

import (
	"fmt"

	"github.com/juju/errors"
)

// Domain errors. Besides these, methods return juju/errors typed errors that
// facades match with errors.Is: errors.NotFound, errors.AlreadyExists and
// errors.NotValid.
var (
	// ErrBadCredentials is returned when an entity is unknown or its
	// password is wrong; the two are not told apart, so a caller cannot
	// probe which entities exist. It matches errors.Unauthorized.
	ErrBadCredentials = errors.NewUnauthorized(nil, "invalid entity name or password")

	// errNoChange aborts a write transaction that turned out to change
	// nothing, so no revision is spent on it. update turns it into nil.
	errNoChange = errors.New("no change")
)

// NotProvisionedError is returned when a machine agent logs in with the
// right password but a nonce other than the one recorded when the machine
// was provisioned. It matches errors.NotProvisioned.
type NotProvisionedError struct {
	Machine string // the machine id
}

func (e *NotProvisionedError) Error() string {
	return fmt.Sprintf("machine %s not provisioned", e.Machine)
}

// Is makes errors.Is(err, errors.NotProvisioned) true.
func (e *NotProvisionedError) Is(target error) bool { return target == errors.NotProvisioned }
