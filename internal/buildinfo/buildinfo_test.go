package buildinfo

import (
	"runtime"
	"testing"
)

func TestInfo(t *testing.T) {
	i := Get()
	if i.Version != Version || i.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v", i)
	}
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "1.0", GoVersion: "go1.26"}, "1.0 (go1.26)"},
		{Info{Version: "1.0", Revision: "0123456789abcdef0123", GoVersion: "go1.26"}, "1.0 (0123456789ab, go1.26)"},
		{Info{Version: "1.0", Revision: "0123456789abcdef0123+dirty", GoVersion: "go1.26"}, "1.0 (0123456789ab+dirty, go1.26)"},
		{Info{Version: "1.0", Revision: "abc", GoVersion: "go1.26"}, "1.0 (abc, go1.26)"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}
