package etcdstore_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestClaimPrefix: a controller's prefix is registered once (again by
// its other daemons, no error); a prefix inside it, or one containing it,
// is refused with ErrNestedPrefix naming the other; siblings that only
// share a beginning ("/a/" and "/ab/") are not nested; of two stores
// claiming nested prefixes at once, exactly one wins.
func TestClaimPrefix(t *testing.T) {
	t.Parallel()
	c := etcdtest.New(t)
	ctx := bounded(t, time.Minute)
	claim := func(prefix string) error {
		return open(t, config(c, prefix, store.Feed{})).ClaimPrefix(ctx)
	}
	for _, p := range []string{"/ctl/", "/ctl/", "/ctlx/", "/other/a/"} {
		if err := claim(p); err != nil {
			t.Fatalf("claim %s: %v", p, err)
		}
	}
	for _, tt := range []struct{ prefix, says string }{
		{"/ctl/sub/", "/ctl/sub/ is inside /ctl/, another controller's"},
		{"/ctl/sub/deeper/", "/ctl/sub/deeper/ is inside /ctl/"},
		{"/other/", "/other/ contains /other/a/"},
		{"/", "/ contains /"},
	} {
		err := claim(tt.prefix)
		if !errors.Is(err, etcdstore.ErrNestedPrefix) || !strings.Contains(err.Error(), tt.says) ||
			!strings.Contains(err.Error(), "etcdctl del "+etcdstore.PrefixRegistry) {
			t.Errorf("claim %s: %v; want ErrNestedPrefix saying %q and how to remove a registration", tt.prefix, err, tt.says)
		}
	}

	for i := range 10 {
		outer := fmt.Sprintf("/race-%d/", i)
		prefixes := []string{outer, outer + "in/"}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for j, p := range prefixes {
			s := open(t, config(c, p, store.Feed{}))
			wg.Go(func() { errs[j] = s.ClaimPrefix(ctx) })
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("claims of %v at once: %v; want exactly one refused", prefixes, errs)
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, etcdstore.ErrNestedPrefix) {
				t.Fatalf("claims of %v at once: %v", prefixes, err)
			}
		}
	}
}
