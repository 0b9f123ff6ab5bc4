package etcdstore_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/state/store"
)

// TestSyncSeesPeersCommits: whatever another store of the prefix has
// committed before Sync is called is in the replica when Sync returns,
// for callers one at a time and for many at once (which share reads).
func TestSyncSeesPeersCommits(t *testing.T) {
	t.Parallel()
	prefix := newPrefix()
	s := open(t, config(shared, prefix, store.Feed{}))
	peer := open(t, config(shared, prefix, store.Feed{}))
	ctx := bounded(t, time.Minute)
	for i := range 20 {
		if _, err := peer.Update(ctx, func(tx store.Txn) error { return tx.Put("k/x", []byte(strconv.Itoa(i))) }); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for j := range errs {
			wg.Go(func() {
				if err := s.Sync(ctx); err != nil {
					errs[j] = err
					return
				}
				errs[j] = s.View(ctx, func(r store.Reader) error {
					v, _, err := r.Get("k/x")
					if err == nil && string(v) != strconv.Itoa(i) {
						err = fmt.Errorf("read %q after Sync; the peer committed %d before it", v, i)
					}
					return err
				})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
