package params

import "fmt"

// Error codes, exactly as Juju's rpc/params/apierror.go spells them.
const (
	CodeNotFound            = "not found"
	CodeUserNotFound        = "user not found"
	CodeModelNotFound       = "model not found"
	CodeUnauthorized        = "unauthorized access"
	CodeLoginExpired        = "login expired"
	CodeNoCreds             = "no credentials provided"
	CodeStopped             = "stopped"
	CodeDead                = "dead"
	CodeHasAssignedUnits    = "machine has assigned units"
	CodeHasHostedModels     = "controller has hosted models"
	CodeMachineHasStorage   = "machine has attached storage"
	CodeHasContainers       = "machine is hosting containers"
	CodeStorageAttached     = "storage is attached"
	CodeNotProvisioned      = "not provisioned"
	CodeNoAddressSet        = "no address set"
	CodeTryAgain            = "try again"
	CodeNotImplemented      = "not implemented"
	CodeAlreadyExists       = "already exists"
	CodeUpgradeInProgress   = "upgrade in progress"
	CodeOperationBlocked    = "operation is blocked"
	CodeNotSupported        = "not supported"
	CodeBadRequest          = "bad request"
	CodeMethodNotAllowed    = "method not allowed"
	CodeForbidden           = "forbidden"
	CodeRedirect            = "redirection required"
	CodeIncompatibleBase    = "incompatible base"
	CodeQuotaLimitExceeded  = "quota limit exceeded"
	CodeNotLeader           = "not leader"
	CodeDeadlineExceeded    = "deadline exceeded"
	CodeNotYetAvailable     = "not yet available; try again later"
	CodeNotValid            = "not valid"
	CodeAccessRequired      = "access required"
	CodeExcessiveContention = "excessive contention"
	CodeNotAssigned         = "not assigned"
	CodeModelNotEmpty       = "model not empty"
	// CodeHasPersistentStorage is Juju's code for a model (or
	// controller) destroy refused for its persistent storage.
	CodeHasPersistentStorage = "controller/model has persistent storage"
	// CodeWatcherReset is provisiond's own: a watch asked to resume after
	// a revision whose history is no longer kept. Only a request with
	// provisiond's "from-revision" header key gets it; the client watches
	// again from scratch.
	CodeWatcherReset = "watcher reset"
)

// Error is Juju's params.Error: the error of one item of a bulk result, and
// the shape the client gives top-level errors too. On the wire "code" is
// always present and "info" is left out when empty.
type Error struct {
	Message string         `json:"message"`
	Code    string         `json:"code"`
	Info    map[string]any `json:"info,omitempty"`
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// ErrorCode returns the Juju error code; rpc writes it as "error-code".
func (e *Error) ErrorCode() string { return e.Code }

// ErrorInfo returns the extra data written as "error-info".
func (e *Error) ErrorInfo() map[string]any { return e.Info }

// GoString helps test failure output.
func (e *Error) GoString() string { return fmt.Sprintf("&params.Error{%q, %q}", e.Message, e.Code) }

// ErrCode returns the code of err when it is a *Error (or wraps one), else "".
func ErrCode(err error) string {
	type coder interface{ ErrorCode() string }
	for err != nil {
		if c, ok := err.(coder); ok {
			return c.ErrorCode()
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return ""
		}
		err = u.Unwrap()
	}
	return ""
}
