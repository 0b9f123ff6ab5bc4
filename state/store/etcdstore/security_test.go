package etcdstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/etcdtest"
	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/state/store/etcdstore"
)

// TestTLS: a store reaches an etcd that requires TLS client certificates
// with the CA, cert and key files; without its certificate, or trusting
// another CA, it fails with ErrUnavailable.
func TestTLS(t *testing.T) {
	c, files := etcdtest.NewTLS(t)
	ctx := bounded(t, time.Minute)
	cfg := config(c, "/tls/", store.Feed{})
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = files.CAFile, files.ClientCert, files.ClientKey
	s := open(t, cfg)
	if _, err := s.Update(ctx, incr("counter/x", "x")); err != nil {
		t.Fatal(err)
	}
	if n := counter(t, ctx, s, "counter/x"); n != 1 {
		t.Errorf("counter %d", n)
	}
	short := cfg
	short.RequestTimeout, short.DialTimeout = 500*time.Millisecond, 500*time.Millisecond
	noCert := short
	noCert.CertFile, noCert.KeyFile = "", ""
	other, err := etcdtest.WriteTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := short
	wrongCA.CAFile = other.CAFile
	for name, cfg := range map[string]etcdstore.Config{"no client certificate": noCert, "another CA": wrongCA} {
		if s, err := etcdstore.Open(ctx, cfg); !errors.Is(err, store.ErrUnavailable) {
			if s != nil {
				s.Close()
			}
			t.Errorf("%s: Open = %v, want ErrUnavailable", name, err)
		}
	}
}

// TestAuth: with etcd's auth enabled, a store logs in with its username
// and password; without them it is refused.
func TestAuth(t *testing.T) {
	c := etcdtest.New(t)
	ctx := bounded(t, time.Minute)
	cli := clientFor(t, c.Endpoints())
	if _, err := cli.UserAdd(ctx, "root", "secret-password"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := config(c, "/auth/", store.Feed{})
	cfg.Username, cfg.Password = "root", "secret-password"
	s := open(t, cfg)
	// A second store's replica follows the first's commits through its
	// watch stream, which must carry the token too (the first store
	// applies its own commits without it).
	other := open(t, cfg)
	rev, err := s.Update(ctx, incr("counter/x", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Health(ctx); err != nil {
		t.Errorf("Health: %v", err)
	}
	if err := other.WaitApplied(ctx, rev); err != nil {
		t.Errorf("the other store's watch never brought revision %d: %v (stats %+v)", rev, err, other.Stats())
	}
	if n := counter(t, ctx, other, "counter/x"); n != 1 {
		t.Errorf("the other store reads counter %d, want 1", n)
	}
	for name, pw := range map[string]string{"no credentials": "", "wrong password": "wrong"} {
		bad := config(c, "/auth/", store.Feed{})
		bad.RequestTimeout = time.Second
		if pw != "" {
			bad.Username, bad.Password = "root", pw
		}
		st, err := etcdstore.Open(ctx, bad)
		if err == nil {
			st.Close()
			t.Errorf("%s: Open succeeded", name)
			continue
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: Open = %v, want ErrUnavailable", name, err)
		}
		if pw != "" && strings.Contains(err.Error(), pw) {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
}
