package params

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorIsCode(t *testing.T) {
	nf := &Error{Message: "machine 7 not found", Code: CodeNotFound}
	wrapped := fmt.Errorf("calling Life: %w", nf)
	cases := []struct {
		err    error
		target error
		want   bool
	}{
		{nf, Code(CodeNotFound), true},
		{wrapped, Code(CodeNotFound), true},
		{nf, Code(CodeUnauthorized), false},
		{&Error{Message: "no code"}, Code(CodeNotFound), false},
		{(*Error)(nil), Code(CodeNotFound), false}, // a bulk item without error
		{errors.New("not found"), Code(CodeNotFound), false},
		{nf, errors.New(CodeNotFound), false},
	}
	for _, c := range cases {
		if got := errors.Is(c.err, c.target); got != c.want {
			t.Errorf("errors.Is(%#v, %v) = %v; want %v", c.err, c.target, got, c.want)
		}
	}
	if Code(CodeTryAgain).Error() != "try again" {
		t.Errorf("Code.Error = %q", Code(CodeTryAgain).Error())
	}
}
