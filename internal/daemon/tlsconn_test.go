package daemon_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/provisiond/provisiond/rpc/client"
)

// The API listener offers session tickets: our client's second
// connection resumes the first one's session, and logs in on it.
func TestAPIResumesTLSSessions(t *testing.T) {
	d := start(t, nil)
	creds := d.Credentials()
	cache := tls.NewLRUClientSessionCache(4)
	for i, want := range []bool{false, true} {
		c, err := client.Dial(ctxT(t), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert), SessionCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.LoginUser(ctxT(t), "admin", creds.AdminPassword); err != nil {
			t.Fatal(err)
		}
		if got := c.ConnectionState().DidResume; got != want {
			t.Fatalf("connection %d: resumed %v, want %v", i+1, got, want)
		}
		c.Close()
	}
}

// Which key exchange clients get (docs/performance.md, "storm"): our
// client (Go's defaults) the hybrid X25519MLKEM768 it offers
// first, a client that offers X25519 alone (Go before 1.24, OpenSSL before
// 3.5) X25519, one offering P-256 alone P-256; none needs a
// HelloRetryRequest, each offering a key share the daemon takes.
func TestAPIKeyExchange(t *testing.T) {
	d := start(t, nil)
	creds := d.Credentials()
	c, err := client.Dial(ctxT(t), client.Config{Addr: d.Addr(), CACert: []byte(creds.CACert)})
	if err != nil {
		t.Fatal(err)
	}
	cs := c.ConnectionState()
	c.Close()
	if cs.CurveID != tls.X25519MLKEM768 || cs.HelloRetryRequest {
		t.Errorf("our client: %v, HelloRetryRequest %v; want X25519MLKEM768 without", cs.CurveID, cs.HelloRetryRequest)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(creds.CACert))
	for _, curve := range []tls.CurveID{tls.X25519, tls.CurveP256} {
		conn, err := tls.Dial("tcp", d.Addr(), &tls.Config{RootCAs: pool, ServerName: client.DefaultServerName, CurvePreferences: []tls.CurveID{curve}})
		if err != nil {
			t.Fatalf("%v: %v", curve, err)
		}
		cs := conn.ConnectionState()
		conn.Close()
		if cs.CurveID != curve || cs.HelloRetryRequest {
			t.Errorf("a client offering %v alone: %v, HelloRetryRequest %v", curve, cs.CurveID, cs.HelloRetryRequest)
		}
	}
}
