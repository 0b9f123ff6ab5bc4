package daemon_test

import (
	"crypto/tls"
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
