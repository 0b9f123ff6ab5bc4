package storage_test

import (
	"errors"
	"testing"
)

// checkErr fails t unless err has the message want ("" means no error)
// and, when kind is not nil, satisfies errors.Is(err, kind).
func checkErr(t *testing.T, err error, want string, kind error) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if err.Error() != want {
		t.Fatalf("error\n got %q\nwant %q", err.Error(), want)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Fatalf("error %q is not %v", err, kind)
	}
}
