package facade

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

func TestServerError(t *testing.T) {
	jsonErr := json.Unmarshal([]byte(`7`), new(params.Entities))
	_, tagErr := ParseMachineTag("unit-a-0")
	tests := []struct {
		name string
		err  error
		msg  string
		code string
	}{
		{"params error passes through", &params.Error{Message: "m", Code: "c"}, "m", "c"},
		{"wrapped params error", fmt.Errorf("ctx: %w", ErrPerm), "permission denied", params.CodeUnauthorized},
		{"client error keeps its text without a code", ClientError(errors.New("both k8s spec and raw k8s spec were set")), "both k8s spec and raw k8s spec were set", ""},
		{"params decoding error", &rpc.ParamsError{Err: jsonErr}, jsonErr.Error(), ""},
		{"tag parse error", tagErr, `"unit-a-0" is not a valid machine tag`, ""},
		{"annotated tag parse error", jujuerrors.Annotate(tagErr, "x"), `x: "unit-a-0" is not a valid machine tag`, ""},
		{"watcher stopped", watcher.ErrStopped, "watcher has been stopped", params.CodeStopped},
		{"resume too old", state.ErrResumeTooOld, state.ErrResumeTooOld.Error(), params.CodeWatcherReset},
		{"call ended with the connection", fmt.Errorf("next: %w", context.Canceled), "watcher has been stopped", params.CodeStopped},
		{"deadline", fmt.Errorf("wait: %w", context.DeadlineExceeded), "wait: context deadline exceeded", params.CodeDeadlineExceeded},
		{"unknown resource", watcher.ErrUnknownResource, "unknown watcher id", params.CodeNotFound},
		{"too many watchers", &watcher.TooManyError{Max: 3}, "too many watchers on this connection (limit 3)", params.CodeQuotaLimitExceeded},
		{"assigned units", fmt.Errorf("machine 1 has unit \"a/0\" assigned: %w", state.ErrHasAssignedUnits), `machine 1 has unit "a/0" assigned: machine has assigned units`, params.CodeHasAssignedUnits},
		{"hosting containers", fmt.Errorf("x: %w", state.ErrHasContainers), "x: machine is hosting containers", params.CodeHasContainers},
		{"attached storage", fmt.Errorf(`cannot destroy storage "data/0": %w`, state.ErrStorageAttached),
			`cannot destroy storage "data/0": storage is attached`, params.CodeStorageAttached},
		{"persistent storage", fmt.Errorf("%w: 1 volume", state.ErrPersistentStorage),
			"model contains persistent storage: 1 volume", params.CodeHasPersistentStorage},
		{"not found", jujuerrors.NotFoundf("machine 3"), "machine 3 not found", params.CodeNotFound},
		{"annotated not found keeps the full text", jujuerrors.Annotate(jujuerrors.NotFoundf("machine 3"), "cannot set"), "cannot set: machine 3 not found", params.CodeNotFound},
		{"std-wrapped not found", fmt.Errorf("x: %w", jujuerrors.NotFoundf("y")), "x: y not found", params.CodeNotFound},
		{"user not found", jujuerrors.UserNotFoundf("bob"), "bob user not found", params.CodeUserNotFound},
		{"unauthorized", jujuerrors.Unauthorizedf("no"), "no", params.CodeUnauthorized},
		{"not provisioned", jujuerrors.NotProvisionedf("machine 1"), "machine 1 not provisioned", params.CodeNotProvisioned},
		{"already exists", jujuerrors.AlreadyExistsf("model %q", "a"), `model "a" already exists`, params.CodeAlreadyExists},
		{"not valid", jujuerrors.NotValidf("name %q", "A"), `name "A" not valid`, params.CodeNotValid},
		{"not supported", jujuerrors.NotSupportedf("x"), "x not supported", params.CodeNotSupported},
		{"not implemented", jujuerrors.NotImplementedf("x"), "x not implemented", params.CodeNotImplemented},
		{"not assigned", jujuerrors.NotAssignedf("x"), "x not assigned", params.CodeNotAssigned},
		{"bad request", jujuerrors.BadRequestf("x"), "x", params.CodeBadRequest},
		{"method not allowed", jujuerrors.MethodNotAllowedf("x"), "x", params.CodeMethodNotAllowed},
		{"forbidden", jujuerrors.Forbiddenf("x"), "x", params.CodeForbidden},
		{"quota", jujuerrors.QuotaLimitExceededf("x"), "x", params.CodeQuotaLimitExceeded},
		{"not yet available", jujuerrors.NotYetAvailablef("x"), "x", params.CodeNotYetAvailable},
		{"timeout", jujuerrors.Timeoutf("x"), "x timeout", params.CodeDeadlineExceeded},
		{"the store retried too often", fmt.Errorf("update: %w", state.ErrStoreContention), ErrContention.Message, params.CodeTryAgain},
		{"the store cannot commit", fmt.Errorf("boltstore: commit: %w: %w", state.ErrStoreUnavailable, errors.New("bbolt said so")), ErrUnavailable.Message, params.CodeTryAgain},
		{"the store committed but did not apply in time", fmt.Errorf("etcdstore: %w: committed at revision 7 but not applied by this process: %w", state.ErrStoreUnavailable, context.DeadlineExceeded), ErrUnavailable.Message, params.CodeTryAgain},
		{"the store is closing", fmt.Errorf("view: %w", state.ErrStoreClosed), ErrClosing.Message, params.CodeTryAgain},
		{"the store is out of space", fmt.Errorf("etcdstore: commit: %w: %w: etcd's database reached its space quota", state.ErrStoreNoSpace, state.ErrStoreUnavailable), ErrStoreFull.Message, params.CodeQuotaLimitExceeded},
		{"a write over the store's limits", fmt.Errorf("etcdstore: %w: 130 operations", state.ErrStoreTooLarge), ErrTooLarge.Message, params.CodeQuotaLimitExceeded},
		{"a full disk says so, without the path", fmt.Errorf("db: commit: %w", &fs.PathError{Op: "write", Path: "/var/lib/provisiond/provisiond.db", Err: syscall.ENOSPC}), ErrDiskFull.Message, ""},
		{"a file system error is internal", fmt.Errorf("db: commit: %w", &fs.PathError{Op: "write", Path: "/var/lib/provisiond/provisiond.db", Err: syscall.EROFS}), ErrInternal.Message, ""},
		{"an errno is internal", fmt.Errorf("x: %w", syscall.EIO), ErrInternal.Message, ""},
		{"any other error keeps its text without a code", errors.New(`cannot remove entity "machine-1": still alive`), `cannot remove entity "machine-1": still alive`, ""},
	}
	used := make([]bool, len(errorTable))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ServerError(tt.err)
			if got.Message != tt.msg || got.Code != tt.code {
				t.Fatalf("ServerError = %q (%q); want %q (%q)", got.Message, got.Code, tt.msg, tt.code)
			}
		})
		for i, row := range errorTable {
			if row.match(tt.err) {
				used[i] = true
				break
			}
		}
	}
	for i, u := range used {
		if !u {
			t.Errorf("no case reaches row %d of the table (%s)", i, errorTable[i].what)
		}
	}
	if ServerError(nil) != nil {
		t.Fatal("ServerError(nil) != nil")
	}
}

// An internal error is logged at error level with the call's facade,
// version, method and request id, and the client sees only ErrInternal;
// another error without a code keeps its text and is logged at info
// level; an error with a code is not logged.
func TestServerErrorLogs(t *testing.T) {
	var log bytes.Buffer
	c := &Context{
		Deps:    &Deps{Logger: slog.New(slog.NewTextHandler(&log, nil))},
		Request: rpc.Request{RequestID: 42, Facade: "Provisioner", Version: 11, Method: "SetStatus"},
	}
	internal := fmt.Errorf("db: put machines/m1: %w", &fs.PathError{Op: "write", Path: "/data/provisiond.db", Err: syscall.EIO})
	if got := c.ServerError(internal); got != ErrInternal {
		t.Fatalf("ServerError = %#v; want ErrInternal", got)
	}
	for _, want := range []string{"level=ERROR", "facade=Provisioner", "version=11", "method=SetStatus", "request-id=42",
		`err="db: put machines/m1: write /data/provisiond.db: input/output error"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log %q lacks %q", log.String(), want)
		}
	}
	log.Reset()
	if got := c.ServerError(errors.New("odd")); got.Message != "odd" || got.Code != "" ||
		!strings.Contains(log.String(), "level=INFO") || !strings.Contains(log.String(), "request-id=42") {
		t.Errorf("an error without a code: %#v, logged %q", got, log.String())
	}
	log.Reset()
	if got := c.ServerError(jujuerrors.NotFoundf("machine 3")); got.Code != params.CodeNotFound || log.Len() != 0 {
		t.Errorf("a known error: %#v, logged %q", got, log.String())
	}
	if got := c.ServerError(ClientError(errors.New("both k8s spec and raw k8s spec were set"))); got.Code != "" || log.Len() != 0 {
		t.Errorf("a client error: %#v, logged %q", got, log.String())
	}
	// Bulk logs through the Context of the call its ctx belongs to.
	ctx := context.WithValue(context.Background(), contextKey{}, c)
	got := Bulk(ctx, []params.Entity{{Tag: "a"}}, func(params.Entity) (params.ErrorResult, error) { return params.ErrorResult{}, internal })
	if got[0].Error != ErrInternal || !strings.Contains(log.String(), "request-id=42") {
		t.Errorf("Bulk item error %#v, log %q", got[0].Error, log.String())
	}
}

func TestBulk(t *testing.T) {
	items := []params.Entity{{Tag: "a"}, {Tag: "b"}, {Tag: "c"}}
	got := Bulk(context.Background(), items, func(e params.Entity) (params.StringResult, error) {
		if e.Tag == "b" {
			return params.StringResult{Result: "partial"}, jujuerrors.NotFoundf("b")
		}
		return params.StringResult{Result: e.Tag}, nil
	})
	if len(got) != 3 || got[0].Result != "a" || got[0].Error != nil || got[2].Result != "c" {
		t.Fatalf("Bulk = %+v", got)
	}
	if got[1].Error == nil || got[1].Error.Code != params.CodeNotFound || got[1].Error.Message != "b not found" {
		t.Fatalf("Bulk error = %#v", got[1].Error)
	}
	if out := Bulk[params.Entity, params.ErrorResult](context.Background(), nil, nil); out == nil || len(out) != 0 {
		t.Fatalf("Bulk(nil) = %#v; want an empty, non-nil slice", out)
	}
}

// Once the call's context is done (the client has gone), Bulk works on no
// more items; the rest get ErrCallCancelled, and there is still one result
// per item.
func TestBulkStopsWhenTheCallEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	items := make([]params.Entity, 100)
	done := 0
	got := Bulk(ctx, items, func(params.Entity) (params.ErrorResult, error) {
		if done++; done == 3 {
			cancel()
		}
		return params.ErrorResult{}, nil
	})
	if done != 3 || len(got) != len(items) {
		t.Fatalf("worked on %d items, %d results; want 3, %d", done, len(got), len(items))
	}
	if got[2].Error != nil || got[3].Error != ErrCallCancelled || got[99].Error != ErrCallCancelled {
		t.Fatalf("results = %+v, %+v, %+v", got[2], got[3], got[99])
	}
}
