package provisioner_test

import (
	"testing"

	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/rpc/params"
)

// The tests here drive the Provisioner facade through a daemon with
// internal/testkit's ProvFixture (its model is described there).

func TestMain(m *testing.M) { leaktest.Main(m) }

// itemErr is what one result item's error should be; zero for none.
type itemErr struct{ msg, code string }

var (
	noErr   = itemErr{}
	permErr = itemErr{"permission denied", params.CodeUnauthorized}
)

func notFound(id string) itemErr { return itemErr{"machine " + id + " not found", params.CodeNotFound} }

func checkItem(t *testing.T, what string, got *params.Error, want itemErr) {
	t.Helper()
	switch {
	case got == nil && want == noErr:
	case got == nil:
		t.Errorf("%s: no error; want %q (%q)", what, want.msg, want.code)
	case want == noErr:
		t.Errorf("%s: error %q (%q); want none", what, got.Message, got.Code)
	case got.Message != want.msg || got.Code != want.code:
		t.Errorf("%s: error %q (%q); want %q (%q)", what, got.Message, got.Code, want.msg, want.code)
	}
}

func checkV1Item(t *testing.T, what string, got *params.V1Error, want itemErr) {
	t.Helper()
	var e *params.Error
	if got != nil {
		e = &params.Error{Message: got.Message, Code: got.Code}
	}
	checkItem(t, what, e, want)
}
