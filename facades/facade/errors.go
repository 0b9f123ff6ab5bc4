package facade

import (
	stderrors "errors"
	"fmt"
	"unicode/utf8"

	"github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

// Errors with fixed wire text (Juju's apiserver/errors singletons).
var (
	// ErrPerm is "permission denied": the caller may not reach the entity.
	// A malformed tag is reported the same way, so callers learn nothing
	// about what exists.
	ErrPerm = &params.Error{Message: "permission denied", Code: params.CodeUnauthorized}
	// ErrBadCreds is the answer to a wrong password or an unknown entity.
	ErrBadCreds = &params.Error{Message: "invalid entity name or password", Code: params.CodeUnauthorized}
	// ErrBadID is Admin called with a non-empty id.
	ErrBadID = &params.Error{Message: "id not found", Code: params.CodeNotFound}
	// ErrUnknownWatcher is a watcher id the connection does not hold.
	ErrUnknownWatcher = &params.Error{Message: "unknown watcher id", Code: params.CodeNotFound}
	// ErrStopped is Next on a stopped watcher.
	ErrStopped = &params.Error{Message: "watcher has been stopped", Code: params.CodeStopped}
	// ErrTryAgain refuses an agent login over the rate limit.
	ErrTryAgain = &params.Error{Message: "try again", Code: params.CodeTryAgain}
	// ErrAlreadyLoggedIn is a second Admin.Login on one connection.
	ErrAlreadyLoggedIn = &params.Error{Message: "already logged in"}
	// ErrNoCreds is a login without a tag or credentials.
	ErrNoCreds = &params.Error{Message: "no credentials provided", Code: params.CodeNoCreds}
)

// codeOf is the ordered table from error kinds to Juju codes. The first
// match wins; the message is always the error's full text.
var codeOf = []struct {
	target error
	code   string
}{
	{state.ErrHasAssignedUnits, params.CodeHasAssignedUnits},
	// The store's transient failures are worth a retry: Juju's clients
	// and agents retry "try again".
	{state.ErrStoreUnavailable, params.CodeTryAgain},
	{state.ErrStoreContention, params.CodeTryAgain},
	{state.ErrStoreClosed, params.CodeTryAgain},
	{state.ErrStoreTooLarge, params.CodeQuotaLimitExceeded},
	{state.ErrHasContainers, params.CodeHasContainers},
	{errors.NotFound, params.CodeNotFound},
	{errors.UserNotFound, params.CodeUserNotFound},
	{errors.Unauthorized, params.CodeUnauthorized},
	{errors.NotProvisioned, params.CodeNotProvisioned},
	{errors.AlreadyExists, params.CodeAlreadyExists},
	{errors.NotValid, params.CodeNotValid},
	{errors.NotSupported, params.CodeNotSupported},
	{errors.NotImplemented, params.CodeNotImplemented},
	{errors.NotAssigned, params.CodeNotAssigned},
	{errors.BadRequest, params.CodeBadRequest},
	{errors.MethodNotAllowed, params.CodeMethodNotAllowed},
	{errors.Forbidden, params.CodeForbidden},
	{errors.QuotaLimitExceeded, params.CodeQuotaLimitExceeded},
	{errors.NotYetAvailable, params.CodeNotYetAvailable},
}

// ServerError turns any error into the wire error: the one mapping point
// from domain errors to Juju codes. nil stays nil. Errors already carrying
// a code keep it; unknown errors get code "".
func ServerError(err error) *params.Error {
	if err == nil {
		return nil
	}
	return boundMessage(serverError(err))
}

// MaxErrorMessage bounds the message of an error sent to a client, in
// bytes: messages quote what clients sent (a tag, a name, a charm URL),
// and a reply must not echo megabytes of it. Longer ones are cut (at a
// rune boundary) and say how long they were.
const MaxErrorMessage = 1024

func boundMessage(pe *params.Error) *params.Error {
	if len(pe.Message) <= MaxErrorMessage {
		return pe
	}
	cut := MaxErrorMessage
	for cut > 0 && !utf8.RuneStart(pe.Message[cut]) {
		cut--
	}
	out := *pe
	out.Message = fmt.Sprintf("%s...(%d bytes)", pe.Message[:cut], len(pe.Message))
	return &out
}

func serverError(err error) *params.Error {
	var pe *params.Error
	if stderrors.As(err, &pe) {
		return pe
	}
	switch {
	case stderrors.Is(err, watcher.ErrStopped):
		return ErrStopped
	case stderrors.Is(err, watcher.ErrUnknownResource):
		return ErrUnknownWatcher
	}
	var tooMany *watcher.TooManyError
	if stderrors.As(err, &tooMany) {
		return &params.Error{Message: err.Error(), Code: params.CodeQuotaLimitExceeded}
	}
	for _, row := range codeOf {
		if errors.Is(err, row.target) {
			return &params.Error{Message: err.Error(), Code: row.code}
		}
	}
	return &params.Error{Message: err.Error()}
}
