package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// An agent's login that finds every --login-concurrent slot taken waits
// for one: with the only slot held it gets "try again" once loginWait has
// passed (the one error an agent sees), and is admitted once the slot
// is released; the rate limit is off by default.
func TestAgentLoginWaitsForASlot(t *testing.T) {
	cfg := Default(t.TempDir())
	cfg.Addr = "127.0.0.1:0"
	cfg.LoginConcurrent = 1
	if cfg.LoginRateMax != 0 {
		t.Fatalf("default login rate limit %d; want 0 (off)", cfg.LoginRateMax)
	}
	d, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Shutdown(context.Background()) })
	creds := d.Credentials()
	a := creds.ControllerAgent
	login := func() error {
		c, err := client.Dial(testCtx(t), client.Config{Addr: d.Addr(), ModelUUID: creds.ControllerModelUUID, CACert: []byte(creds.CACert)})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.LoginAgent(testCtx(t), a.Tag, a.Password, a.Nonce)
		return err
	}

	release, ok := d.limiter.Acquire(context.Background())
	if !ok {
		t.Fatal("the only slot was not free")
	}
	var pe *params.Error
	if err := login(); !errors.As(err, &pe) || pe.Code != params.CodeTryAgain {
		t.Fatalf("login with the only slot held: %v; want try again", err)
	}
	done := make(chan error, 1)
	go func() { done <- login() }()
	release()
	if err := <-done; err != nil {
		t.Fatalf("login once the slot is released: %v", err)
	}
}
