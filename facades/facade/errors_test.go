package facade

import (
	"context"
	"errors"
	"fmt"
	"testing"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
	"github.com/provisiond/provisiond/watcher"
)

func TestServerError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		msg  string
		code string
	}{
		{"params error passes through", &params.Error{Message: "m", Code: "c"}, "m", "c"},
		{"wrapped params error", fmt.Errorf("ctx: %w", ErrPerm), "permission denied", params.CodeUnauthorized},
		{"watcher stopped", watcher.ErrStopped, "watcher has been stopped", params.CodeStopped},
		{"unknown resource", watcher.ErrUnknownResource, "unknown watcher id", params.CodeNotFound},
		{"too many watchers", &watcher.TooManyError{Max: 3}, "too many watchers on this connection (limit 3)", params.CodeQuotaLimitExceeded},
		{"not found", jujuerrors.NotFoundf("machine 3"), "machine 3 not found", params.CodeNotFound},
		{"annotated not found keeps the full text", jujuerrors.Annotate(jujuerrors.NotFoundf("machine 3"), "cannot set"), "cannot set: machine 3 not found", params.CodeNotFound},
		{"std-wrapped not found", fmt.Errorf("x: %w", jujuerrors.NotFoundf("y")), "x: y not found", params.CodeNotFound},
		{"unauthorized", jujuerrors.Unauthorizedf("no"), "no", params.CodeUnauthorized},
		{"not provisioned", jujuerrors.NotProvisionedf("machine 1"), "machine 1 not provisioned", params.CodeNotProvisioned},
		{"already exists", jujuerrors.AlreadyExistsf("model %q", "a"), `model "a" already exists`, params.CodeAlreadyExists},
		{"not valid", jujuerrors.NotValidf("name %q", "A"), `name "A" not valid`, params.CodeNotValid},
		{"not supported", jujuerrors.NotSupportedf("x"), "x not supported", params.CodeNotSupported},
		{"assigned units", fmt.Errorf("machine 1 has unit \"a/0\" assigned: %w", state.ErrHasAssignedUnits), `machine 1 has unit "a/0" assigned: machine has assigned units`, params.CodeHasAssignedUnits},
		{"hosting containers", fmt.Errorf("x: %w", state.ErrHasContainers), "x: machine is hosting containers", params.CodeHasContainers},
		{"plain error has no code", errors.New("boom"), "boom", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ServerError(tt.err)
			if got.Message != tt.msg || got.Code != tt.code {
				t.Fatalf("ServerError = %q (%q); want %q (%q)", got.Message, got.Code, tt.msg, tt.code)
			}
		})
	}
	if ServerError(nil) != nil {
		t.Fatal("ServerError(nil) != nil")
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
