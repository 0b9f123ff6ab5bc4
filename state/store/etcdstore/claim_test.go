package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// TestClaimPrefixWhileEtcdDoesNotAnswer: a registration sent while etcd
// does not answer (a daemon starting while etcd is slow, or while its
// member watch cuts the connection the registration is on) is sent again
// until etcd answers, and then holds; while etcd does not answer it ends
// with ErrUnavailable when the caller's context does.
func TestClaimPrefixWhileEtcdDoesNotAnswer(t *testing.T) {
	t.Parallel()
	c := etcdtest.New(t)
	ctx := bounded(t, 2*time.Minute)
	retrying := &logSignal{msg: "registering the etcd prefix: trying again", seen: make(chan struct{})}
	cfg := config(c, "/unanswered/", store.Feed{})
	cfg.RequestTimeout = time.Second
	cfg.Logger = slog.New(retrying)
	s := open(t, cfg)
	c.Stop(0)

	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.ClaimPrefix(short); !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ClaimPrefix with etcd down until its context ended: %v; want ErrUnavailable and the deadline", err)
	}

	done := make(chan error, 1)
	go func() { done <- s.ClaimPrefix(ctx) }()
	select {
	case <-retrying.seen:
	case err := <-done:
		t.Fatalf("ClaimPrefix with etcd down: %v; want it to try again", err)
	case <-ctx.Done():
		t.Fatal("ClaimPrefix with etcd down: no second try logged")
	}
	if err := c.Restart(0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ClaimPrefix once etcd answers again: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("ClaimPrefix did not return once etcd answered again")
	}
	err := open(t, config(c, "/unanswered/in/", store.Feed{})).ClaimPrefix(ctx)
	if !errors.Is(err, etcdstore.ErrNestedPrefix) {
		t.Fatalf("claim of a prefix inside the one registered after the retries: %v; want ErrNestedPrefix", err)
	}
}

// logSignal is a slog handler that closes seen at the first record whose
// message is msg.
type logSignal struct {
	msg  string
	once sync.Once
	seen chan struct{}
}

func (h *logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logSignal) WithGroup(string) slog.Handler            { return h }

func (h *logSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
