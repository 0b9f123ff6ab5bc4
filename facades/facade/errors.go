package facade

import (
	"context"
	stderrors "errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
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
	// ErrInternal is what a client sees of an internal error (the
	// store's, the file system's): a stable message instead of internal
	// texts (a database path, a bucket and key). The error itself is
	// logged with the call.
	ErrInternal = &params.Error{Message: "internal server error (see the server log)"}
	// ErrDiskFull is a write that failed for want of disk space (or
	// quota): the operator's to fix, so the client is told, without the
	// server's paths.
	ErrDiskFull = &params.Error{Message: "cannot write the state: no space left on device (see the server log)"}
	// ErrUnavailable is a write the store cannot commit now (etcd without
	// quorum, a file that cannot be written): the client may retry.
	ErrUnavailable = &params.Error{Message: "the state store is unavailable; try again", Code: params.CodeTryAgain}
	// ErrContention is a write that conflicted with others more often than
	// the store retries it (Juju's text for its transaction contention).
	ErrContention = &params.Error{Message: "state changing too quickly; try again soon", Code: params.CodeTryAgain}
	// ErrClosing is a call that reached the store as the daemon stops.
	ErrClosing = &params.Error{Message: "the server is shutting down; try again", Code: params.CodeTryAgain}
	// ErrStoreFull is a write the store refuses until an operator frees
	// space (etcd's space quota reached, its NOSPACE alarm raised): no
	// retry helps, so not "try again" (which Juju's agents retry for
	// ever) but Juju's own quota code.
	ErrStoreFull = &params.Error{Message: "the state store is out of space (etcd's space quota is reached); an operator must free space (see the server log)", Code: params.CodeQuotaLimitExceeded}
	// ErrTooLarge is one write over the store's limits (etcd's operations
	// per transaction or request size).
	ErrTooLarge = &params.Error{Message: "the change is too large for the state store; make it in smaller calls", Code: params.CodeQuotaLimitExceeded}
)

// ClientError makes err's text the wire error as it is, with no code: for
// the messages the specs give without a code (a tag's parse error text,
// "both k8s spec and raw k8s spec were set"), which the table then neither
// logs nor looks into.
func ClientError(err error) error {
	if err == nil {
		return nil
	}
	return &params.Error{Message: err.Error()}
}

// coder is an error that carries its wire code: *params.Error (facades'
// own wire errors, ClientError), rpc's errors (*rpc.ParamsError, a params
// decoding error: encoding/json's text, no code), TagError.
type coder interface {
	error
	ErrorCode() string
}

// logNone and the slog levels say whether ServerError logs an error a row
// matches, and how loudly.
const logNone = slog.Level(-100)

// errorTable is the one table from errors to wire errors, tried in order:
// the first row whose match reports true gives the wire error, and says
// whether to log it. A row that keeps the error's text keeps its full
// annotated text, as Juju's ServerError does; the code comes from the
// underlying cause.
//
// Internal errors (the store's and the file system's: a path, a bucket
// and key, errno texts) are logged at error level and the client sees
// ErrInternal. Any other error without a code keeps its text, as Juju
// does and as the specs give many messages ("cannot remove entity
// \"machine-1\": still alive"), and is logged at info level, so that an
// unexpected one is seen with its call.
var errorTable = []struct {
	what  string // for the table test and the docs
	match func(error) bool
	wire  func(error) *params.Error
	log   slog.Level
}{
	{"a wire error (params.Error, ClientError) passes through", asType[*params.Error], func(err error) *params.Error {
		pe, _ := asValue[*params.Error](err)
		return pe
	}, logNone},
	{"an error carrying its code (rpc.ParamsError, TagError) keeps text and code", asType[coder], func(err error) *params.Error {
		c, _ := asValue[coder](err)
		return &params.Error{Message: err.Error(), Code: c.ErrorCode()}
	}, logNone},
	{"a stopped watcher", is(watcher.ErrStopped), fixed(ErrStopped), logNone},
	// Only a Watch call with provisiond's from-revision gets it.
	{"a watch resumed after a revision whose history is gone", is(state.ErrResumeTooOld), withCode(params.CodeWatcherReset), logNone},
	// A call's context ends only when its connection does. The calls that
	// wait on it are watchers' Next, whose watchers are being stopped with
	// the connection; agents treat code "stopped" as a clean end.
	{"a call ended by its connection's end", is(context.Canceled), fixed(ErrStopped), logNone},
	{"an unknown watcher id", is(watcher.ErrUnknownResource), fixed(ErrUnknownWatcher), logNone},
	{"too many watchers", asType[*watcher.TooManyError], withCode(params.CodeQuotaLimitExceeded), logNone},
	{"a full disk", isAny(syscall.ENOSPC, syscall.EDQUOT), fixed(ErrDiskFull), slog.LevelError},
	// The store's transient failures are worth a retry: Juju's clients
	// and agents retry "try again". After the full disk (a commit that
	// failed on it wraps both) and before the deadline: a store error may
	// wrap a deadline (a commit etcd made that this daemon did
	// not apply in time), and it is the store's code that is meant.
	{"the store retried too often", is(state.ErrStoreContention), fixed(ErrContention), slog.LevelWarn},
	// Before "cannot commit now": it wraps that too.
	{"the store is out of space (etcd's quota)", is(state.ErrStoreNoSpace), fixed(ErrStoreFull), slog.LevelError},
	{"the store cannot commit now", is(state.ErrStoreUnavailable), fixed(ErrUnavailable), slog.LevelError},
	{"the store is closing (the daemon stops)", is(state.ErrStoreClosed), fixed(ErrClosing), slog.LevelWarn},
	{"a write over the store's limits", is(state.ErrStoreTooLarge), fixed(ErrTooLarge), slog.LevelWarn},
	{"a deadline", is(context.DeadlineExceeded), withCode(params.CodeDeadlineExceeded), logNone},
	{"a file system or system call error", isIOError, fixed(ErrInternal), slog.LevelError},
	{"a machine with units", is(state.ErrHasAssignedUnits), withCode(params.CodeHasAssignedUnits), logNone},
	{"a machine with containers", is(state.ErrHasContainers), withCode(params.CodeHasContainers), logNone},
	{"attached storage", is(state.ErrStorageAttached), withCode(params.CodeStorageAttached), logNone},
	{"a model with persistent storage", is(state.ErrPersistentStorage), withCode(params.CodeHasPersistentStorage), logNone},
	{"juju/errors NotFound", is(errors.NotFound), withCode(params.CodeNotFound), logNone},
	{"juju/errors UserNotFound", is(errors.UserNotFound), withCode(params.CodeUserNotFound), logNone},
	{"juju/errors Unauthorized", is(errors.Unauthorized), withCode(params.CodeUnauthorized), logNone},
	{"juju/errors NotProvisioned", is(errors.NotProvisioned), withCode(params.CodeNotProvisioned), logNone},
	{"juju/errors AlreadyExists", is(errors.AlreadyExists), withCode(params.CodeAlreadyExists), logNone},
	{"juju/errors NotValid", is(errors.NotValid), withCode(params.CodeNotValid), logNone},
	{"juju/errors NotSupported", is(errors.NotSupported), withCode(params.CodeNotSupported), logNone},
	{"juju/errors NotImplemented", is(errors.NotImplemented), withCode(params.CodeNotImplemented), logNone},
	{"juju/errors NotAssigned", is(errors.NotAssigned), withCode(params.CodeNotAssigned), logNone},
	{"juju/errors BadRequest", is(errors.BadRequest), withCode(params.CodeBadRequest), logNone},
	{"juju/errors MethodNotAllowed", is(errors.MethodNotAllowed), withCode(params.CodeMethodNotAllowed), logNone},
	{"juju/errors Forbidden", is(errors.Forbidden), withCode(params.CodeForbidden), logNone},
	{"juju/errors QuotaLimitExceeded", is(errors.QuotaLimitExceeded), withCode(params.CodeQuotaLimitExceeded), logNone},
	{"juju/errors NotYetAvailable", is(errors.NotYetAvailable), withCode(params.CodeNotYetAvailable), logNone},
	{"juju/errors Timeout", is(errors.Timeout), withCode(params.CodeDeadlineExceeded), logNone},
	{"any other error: its text, no code", func(error) bool { return true }, withCode(""), slog.LevelInfo},
}

// isIOError reports an error of the file system or of a system call,
// which is never about what the client sent.
func isIOError(err error) bool {
	return asType[*fs.PathError](err) || asType[*os.LinkError](err) || asType[*os.SyscallError](err) ||
		asType[syscall.Errno](err)
}

func isAny(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if stderrors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func asType[T error](err error) bool {
	_, ok := asValue[T](err)
	return ok
}

func asValue[T error](err error) (T, bool) {
	var t T
	ok := stderrors.As(err, &t)
	return t, ok
}

func fixed(pe *params.Error) func(error) *params.Error {
	return func(error) *params.Error { return pe }
}

func withCode(code string) func(error) *params.Error {
	return func(err error) *params.Error { return &params.Error{Message: err.Error(), Code: code} }
}

// toWire looks err up in the table: the wire error and how loudly to log
// err (logNone: not at all).
func toWire(err error) (*params.Error, slog.Level) {
	for _, row := range errorTable {
		if row.match(err) {
			return row.wire(err), row.log
		}
	}
	panic("unreachable: the table's last row matches every error")
}

// ServerError turns any error into the wire error through the table: the
// one mapping point from errors to Juju codes. nil stays nil. Errors the
// table logs (internal ones, and errors without a code it does not know)
// are logged with the facade, version, method and request id of the call
// c answers. A nil c (no call at hand) logs through slog's default logger
// without them.
func (c *Context) ServerError(err error) *params.Error {
	if err == nil {
		return nil
	}
	pe, level := toWire(err)
	if level != logNone {
		c.logError(level, err)
	}
	return boundMessage(pe)
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

func (c *Context) logError(level slog.Level, err error) {
	const msg = "call failed"
	if c == nil || c.Deps == nil || c.Deps.Logger == nil {
		slog.Log(context.Background(), level, msg, "err", err.Error())
		return
	}
	r := c.Request
	c.Deps.Logger.Log(context.Background(), level, msg, "facade", r.Facade, "version", r.Version,
		"method", r.Method, "request-id", r.RequestID, "err", err.Error())
}

// ServerError is Context.ServerError for code that has no call's Context
// at hand: the error is mapped the same, and logged without the call.
// Inside a call, use the call's Context (Bulk does, through its ctx).
func ServerError(err error) *params.Error { return (*Context)(nil).ServerError(err) }
