package client

import "github.com/provisiond/provisiond/rpc/params"

// Error codes as values for errors.Is, one per code of package params
// (Juju's spellings). They match a call's error and the per-item error of
// a bulk result alike, since both are *params.Error:
//
//	err := p.Machine("machine-7").EnsureDead(ctx)
//	if errors.Is(err, client.ErrNotFound) { ... }
//
//	res, err := p.Life(ctx, client.Entities("machine-0", "machine-7"))
//	if err == nil && errors.Is(res.Results[1].Error, client.ErrNotFound) { ... }
//
// An error without a code matches none of them. errors.As with a
// *params.Error gives the message, code and info; [IsCode] tests a code
// given as a string.
const (
	ErrNotFound             = params.Code(params.CodeNotFound)
	ErrUserNotFound         = params.Code(params.CodeUserNotFound)
	ErrModelNotFound        = params.Code(params.CodeModelNotFound)
	ErrUnauthorized         = params.Code(params.CodeUnauthorized)
	ErrLoginExpired         = params.Code(params.CodeLoginExpired)
	ErrNoCreds              = params.Code(params.CodeNoCreds)
	ErrStopped              = params.Code(params.CodeStopped)
	ErrDead                 = params.Code(params.CodeDead)
	ErrHasAssignedUnits     = params.Code(params.CodeHasAssignedUnits)
	ErrHasHostedModels      = params.Code(params.CodeHasHostedModels)
	ErrMachineHasStorage    = params.Code(params.CodeMachineHasStorage)
	ErrHasContainers        = params.Code(params.CodeHasContainers)
	ErrStorageAttached      = params.Code(params.CodeStorageAttached)
	ErrNotProvisioned       = params.Code(params.CodeNotProvisioned)
	ErrNoAddressSet         = params.Code(params.CodeNoAddressSet)
	ErrTryAgain             = params.Code(params.CodeTryAgain)
	ErrNotImplemented       = params.Code(params.CodeNotImplemented)
	ErrAlreadyExists        = params.Code(params.CodeAlreadyExists)
	ErrUpgradeInProgress    = params.Code(params.CodeUpgradeInProgress)
	ErrOperationBlocked     = params.Code(params.CodeOperationBlocked)
	ErrNotSupported         = params.Code(params.CodeNotSupported)
	ErrBadRequest           = params.Code(params.CodeBadRequest)
	ErrMethodNotAllowed     = params.Code(params.CodeMethodNotAllowed)
	ErrForbidden            = params.Code(params.CodeForbidden)
	ErrRedirect             = params.Code(params.CodeRedirect)
	ErrIncompatibleBase     = params.Code(params.CodeIncompatibleBase)
	ErrQuotaLimitExceeded   = params.Code(params.CodeQuotaLimitExceeded)
	ErrNotLeader            = params.Code(params.CodeNotLeader)
	ErrDeadlineExceeded     = params.Code(params.CodeDeadlineExceeded)
	ErrNotYetAvailable      = params.Code(params.CodeNotYetAvailable)
	ErrNotValid             = params.Code(params.CodeNotValid)
	ErrAccessRequired       = params.Code(params.CodeAccessRequired)
	ErrExcessiveContention  = params.Code(params.CodeExcessiveContention)
	ErrNotAssigned          = params.Code(params.CodeNotAssigned)
	ErrModelNotEmpty        = params.Code(params.CodeModelNotEmpty)
	ErrHasPersistentStorage = params.Code(params.CodeHasPersistentStorage)
	ErrWatcherReset         = params.Code(params.CodeWatcherReset)
)
