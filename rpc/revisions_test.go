package rpc_test

import (
	"context"
	"testing"
	"time"
)

// TestReplyRevision: a reply to a request that named a from-revision
// carries the revision its method set (none if it set none); set several
// times (a bulk Watch call's watchers), the lowest, so that a client
// resuming every watcher of the call from it misses no change any of them
// covers.
func TestReplyRevision(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		revs []uint64
		want uint64
	}{
		{[]uint64{7}, 7},
		{[]uint64{9, 5, 8}, 5},
		{[]uint64{0, 4}, 4},
		{nil, 0},
	} {
		rev, err := c.CallFrom(ctx, "T", 1, "", "Revisions", 3, tc.revs, nil)
		if err != nil || rev != tc.want {
			t.Errorf("revisions set %v: the reply carries %d, %v; want %d", tc.revs, rev, err, tc.want)
		}
	}
	if rev, err := c.CallFrom(ctx, "T", 1, "", "Nothing", 3, nil, nil); err != nil || rev != 0 {
		t.Errorf("a method that sets none: %d, %v", rev, err)
	}
}
