package daemon

import "testing"

// The default connection cap follows the file limit and the memory, and
// never drops below 64.
func TestDefaultMaxConns(t *testing.T) {
	for _, tc := range []struct {
		files, memory int64
		want          int
	}{
		{1024, 0, 896},
		{1024, 64 << 30, 896},
		{1 << 20, 1 << 30, 1638},
		{20000, 24 << 30, 19872},
		{0, 0, 1 << 20},
		{100, 0, 64},
		{1 << 20, 16 << 20, 64},
	} {
		if got := defaultMaxConns(tc.files, tc.memory); got != tc.want {
			t.Errorf("defaultMaxConns(%d files, %d bytes) = %d; want %d", tc.files, tc.memory, got, tc.want)
		}
	}
	if n := DefaultMaxConns(); n < minDefaultConns {
		t.Errorf("DefaultMaxConns() = %d", n)
	}
}
