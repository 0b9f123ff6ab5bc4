package rpc

import (
	"fmt"

	"github.com/provisiond/provisiond/rpc/params"
)

// The errors rpc itself produces. Facades produce theirs through
// facades/facade.ServerError; rpc only reads the code of whatever error it
// is given (any error with an ErrorCode method).

// ErrShutdown answers requests that arrive while the connection closes.
var ErrShutdown = &params.Error{Message: "connection is shut down"}

// UnknownFacadeError is the error for a facade name or version not served.
func UnknownFacadeError(name string, version int) error {
	if version == 0 {
		return &params.Error{Message: fmt.Sprintf("unknown facade type %q", name), Code: params.CodeNotImplemented}
	}
	return &params.Error{Message: fmt.Sprintf("unknown version %d for facade type %q", version, name), Code: params.CodeNotImplemented}
}

// UnknownMethodError is the error for a method the facade version lacks.
func UnknownMethodError(name string, version int, method string) error {
	return &params.Error{
		Message: fmt.Sprintf("unknown method %q at version %d for facade type %q", method, version, name),
		Code:    params.CodeNotImplemented,
	}
}

// PanicError is the reply to a handler that panicked: the panic value as the
// message and no code, as Juju does.
func PanicError(v any) error {
	return &params.Error{Message: fmt.Sprint(v)}
}

// TooManyRequestsError answers a request over the per-connection limit.
func TooManyRequestsError(limit int) error {
	return &params.Error{
		Message: fmt.Sprintf("too many concurrent requests on this connection (limit %d)", limit),
		Code:    params.CodeTryAgain,
	}
}

// TooManyItemsError refuses a call whose params hold more list items than
// the per-call limit (Config.MaxBulkItems).
func TooManyItemsError(n, limit int) error {
	return &params.Error{
		Message: fmt.Sprintf("too many items in one call: %d (limit %d); send them in smaller calls", n, limit),
		Code:    params.CodeQuotaLimitExceeded,
	}
}

// ReplyTooLargeError answers a call whose reply is over Config.MaxReplySize.
func ReplyTooLargeError(size, limit int64) error {
	return &params.Error{
		Message: fmt.Sprintf("reply of %d bytes is over the limit of %d bytes; ask for fewer items", size, limit),
		Code:    params.CodeQuotaLimitExceeded,
	}
}
