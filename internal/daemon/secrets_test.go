package daemon_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/params"
)

// syncBuffer is internal/testkit's SyncBuffer.
type syncBuffer = testkit.SyncBuffer

// No password, nonce or credential reaches a log line or an error message,
// at debug level, through good and bad logins.
func TestNoSecretsInLogs(t *testing.T) {
	var logs syncBuffer
	d := start(t, func(c *daemon.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	creds := d.Credentials()
	agent := creds.ControllerAgent
	const wrong = "wrong-password-that-must-not-be-logged"
	const wrongNonce = "nonce-that-must-not-be-logged"
	var errs []string
	try := func(model string, req params.LoginRequest) {
		c := dial(t, d, model)
		if _, err := c.Login(ctxT(t), req); err != nil {
			errs = append(errs, err.Error())
		}
		c.Close()
	}
	try(creds.DefaultModelUUID, params.LoginRequest{AuthTag: "user-admin", Credentials: creds.AdminPassword})
	try(creds.DefaultModelUUID, params.LoginRequest{AuthTag: "user-admin", Credentials: wrong})
	try(creds.ControllerModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password, Nonce: agent.Nonce})
	try(creds.ControllerModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password, Nonce: wrongNonce})
	try(creds.ControllerModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: wrong, Nonce: agent.Nonce})
	try(creds.ControllerModelUUID, params.LoginRequest{AuthTag: "machine-9", Credentials: wrong, Nonce: wrongNonce})

	all := logs.String() + strings.Join(errs, "\n")
	if !strings.Contains(all, "login refused") {
		t.Fatal("no login was logged; the test would prove nothing")
	}
	for name, secret := range map[string]string{
		"admin password": creds.AdminPassword, "agent password": agent.Password, "agent nonce": agent.Nonce,
		"wrong password": wrong, "wrong nonce": wrongNonce,
	} {
		if strings.Contains(all, secret) {
			t.Errorf("%s appears in a log line or error message", name)
		}
	}
}
