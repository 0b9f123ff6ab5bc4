package admin_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/provisiond/provisiond/internal/daemon"
	"github.com/provisiond/provisiond/internal/leaktest"
	"github.com/provisiond/provisiond/internal/testkit"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/state"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// Admin v3 as clients see it: the login result, who may log in where and
// with what error, the facade's rules before and after a login, and the
// agent login rate.

func TestLoginResult(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	c := testkit.Dial(t, d, creds.DefaultModelUUID)
	res, err := c.LoginUser(testkit.Ctx(t), "admin", creds.AdminPassword)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelTag != "model-"+creds.DefaultModelUUID || res.ControllerTag != "controller-"+creds.ControllerUUID {
		t.Errorf("tags = %q, %q", res.ModelTag, res.ControllerTag)
	}
	if res.ServerVersion != "3.3.0" {
		t.Errorf("server-version = %q", res.ServerVersion)
	}
	if res.UserInfo == nil || res.UserInfo.Identity != "user-admin" || res.UserInfo.ControllerAccess != "superuser" || res.UserInfo.ModelAccess != "admin" {
		t.Errorf("user-info = %+v", res.UserInfo)
	}
	if len(res.Servers) != 1 || len(res.Servers[0]) != 1 || res.Servers[0][0].Value != "127.0.0.1" ||
		res.Servers[0][0].Scope != "local-machine" || res.Servers[0][0].Type != "ipv4" {
		t.Errorf("servers = %+v", res.Servers)
	}
	got := map[string][]int{}
	for _, f := range res.Facades {
		got[f.Name] = f.Versions
	}
	for _, name := range []string{"Pinger", "NotifyWatcher", "StringsWatcher", "Provisioner"} {
		if len(got[name]) == 0 {
			t.Errorf("facades lack %s: %v", name, got)
		}
	}

	// The controller endpoint: no model tag, only controller facades.
	c2 := testkit.Dial(t, d, "")
	res, err = c2.LoginUser(testkit.Ctx(t), "admin", creds.AdminPassword)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelTag != "" {
		t.Errorf("/api model-tag = %q; want empty", res.ModelTag)
	}
	for _, f := range res.Facades {
		if f.Name == "Provisioner" {
			t.Errorf("/api offers Provisioner")
		}
	}
	err = c2.Call(testkit.Ctx(t), "Provisioner", 11, "", "ModelUUID", nil, nil)
	testkit.WantErr(t, err, `facade "Provisioner" not supported for controller API connection`, params.CodeNotSupported)
}

func TestLoginMatrix(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	st := d.State()
	// machine 0 of the default model, provisioned with its own password and
	// nonce: on that model's endpoint it is checked before the controller.
	if _, err := st.AddMachine(t.Context(), creds.DefaultModelUUID, state.MachineParams{
		Password: "hosted-machine-0-password", Nonce: "hosted-nonce", InstanceID: "i-0",
	}); err != nil {
		t.Fatal(err)
	}
	// machine 1, not yet provisioned.
	if _, err := st.AddMachine(t.Context(), creds.DefaultModelUUID, state.MachineParams{Password: "machine-1-password-long"}); err != nil {
		t.Fatal(err)
	}
	agent := creds.ControllerAgent
	tests := []struct {
		name  string
		model string
		req   params.LoginRequest
		msg   string
		code  string
	}{
		{"admin", creds.DefaultModelUUID, params.LoginRequest{AuthTag: "user-admin", Credentials: creds.AdminPassword}, "", ""},
		{"admin@local", "", params.LoginRequest{AuthTag: "user-admin@local", Credentials: creds.AdminPassword}, "", ""},
		{"admin wrong password", creds.DefaultModelUUID, params.LoginRequest{AuthTag: "user-admin", Credentials: "nope"}, "invalid entity name or password", params.CodeUnauthorized},
		{"unknown user", "", params.LoginRequest{AuthTag: "user-bob", Credentials: "x"}, "invalid entity name or password", params.CodeUnauthorized},
		{"controller agent on controller model", creds.ControllerModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password, Nonce: agent.Nonce}, "", ""},
		{"controller agent on /api", "", params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password, Nonce: agent.Nonce}, "", ""},
		{"controller agent on hosted model", creds.DefaultModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password, Nonce: agent.Nonce}, "", ""},
		{"hosted machine 0 on its model", creds.DefaultModelUUID, params.LoginRequest{AuthTag: "machine-0", Credentials: "hosted-machine-0-password", Nonce: "hosted-nonce"}, "", ""},
		{"hosted machine 0 on the controller model", creds.ControllerModelUUID, params.LoginRequest{AuthTag: "machine-0", Credentials: "hosted-machine-0-password", Nonce: "hosted-nonce"}, "invalid entity name or password", params.CodeUnauthorized},
		// Juju's authenticator (apiserver/stateauthenticator) tries the
		// controller model's machine after the hosted model's fails, and
		// counts only its success: a wrong nonce there is the hosted
		// model's bad credentials, not "not provisioned".
		{"controller agent wrong nonce on hosted model", creds.DefaultModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password, Nonce: "other"}, "invalid entity name or password", params.CodeUnauthorized},
		{"controller agent wrong nonce", creds.ControllerModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password, Nonce: "other"}, "machine 0 not provisioned", params.CodeNotProvisioned},
		{"controller agent no nonce", creds.ControllerModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: agent.Password}, "machine 0 not provisioned", params.CodeNotProvisioned},
		{"controller agent wrong password", creds.ControllerModelUUID, params.LoginRequest{AuthTag: agent.Tag, Credentials: "wrong-password-wrong", Nonce: agent.Nonce}, "invalid entity name or password", params.CodeUnauthorized},
		{"unprovisioned machine", creds.DefaultModelUUID, params.LoginRequest{AuthTag: "machine-1", Credentials: "machine-1-password-long", Nonce: "x"}, "machine 1 not provisioned", params.CodeNotProvisioned},
		{"unknown machine", creds.DefaultModelUUID, params.LoginRequest{AuthTag: "machine-42", Credentials: "whatever-whatever-whatever"}, "invalid entity name or password", params.CodeUnauthorized},
		{"unit agent", creds.DefaultModelUUID, params.LoginRequest{AuthTag: "unit-mysql-0", Credentials: "whatever-whatever-whatever"}, "invalid entity name or password", params.CodeUnauthorized},
		{"bad tag", creds.DefaultModelUUID, params.LoginRequest{AuthTag: "foo", Credentials: "x"}, `"foo" is not a valid tag`, ""},
		{"no tag", creds.DefaultModelUUID, params.LoginRequest{}, "no credentials provided", params.CodeNoCreds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testkit.Dial(t, d, tt.model)
			_, err := c.Login(testkit.Ctx(t), tt.req)
			if tt.msg == "" && tt.code == "" {
				if err != nil {
					t.Fatalf("login: %v", err)
				}
				if err := c.Ping(testkit.Ctx(t)); err != nil {
					t.Fatalf("ping after login: %v", err)
				}
				return
			}
			testkit.WantErr(t, err, tt.msg, tt.code)
			// A failed login leaves the connection logged out but usable.
			err = c.Call(testkit.Ctx(t), "Pinger", 1, "", "Ping", nil, nil)
			testkit.WantErr(t, err, `unknown version 1 for facade type "Pinger"`, params.CodeNotImplemented)
		})
	}
}

func TestAdminRules(t *testing.T) {
	d := testkit.Start(t, nil)
	creds := d.Credentials()
	c := testkit.Dial(t, d, creds.DefaultModelUUID)

	testkit.WantErr(t, c.Call(testkit.Ctx(t), "Pinger", 1, "", "Ping", nil, nil), `unknown version 1 for facade type "Pinger"`, params.CodeNotImplemented)
	testkit.WantErr(t, c.Call(testkit.Ctx(t), "Admin", 2, "", "Login", params.LoginRequest{}, nil),
		"this version of Juju does not support login from old clients", params.CodeNotSupported)
	testkit.WantErr(t, c.Call(testkit.Ctx(t), "Admin", 3, "x", "Login", params.LoginRequest{}, nil), "id not found", params.CodeNotFound)
	testkit.WantErr(t, c.Call(testkit.Ctx(t), "Admin", 3, "", "RedirectInfo", nil, nil), "not redirected", "")

	if _, err := c.LoginUser(testkit.Ctx(t), "admin", creds.AdminPassword); err != nil {
		t.Fatal(err)
	}
	_, err := c.LoginUser(testkit.Ctx(t), "admin", creds.AdminPassword)
	testkit.WantErr(t, err, "already logged in", "")
}

func TestUnknownModel(t *testing.T) {
	d := testkit.Start(t, nil)
	const uuid = "11111111-2222-4333-8444-555555555555"
	c := testkit.Dial(t, d, uuid)
	_, err := c.LoginUser(testkit.Ctx(t), "admin", d.Credentials().AdminPassword)
	testkit.WantErr(t, err, fmt.Sprintf("unknown model: %q", uuid), params.CodeModelNotFound)
	testkit.WantErr(t, c.Ping(testkit.Ctx(t)), fmt.Sprintf("unknown model: %q", uuid), params.CodeModelNotFound)
}

func TestLoginRateLimit(t *testing.T) {
	d := testkit.Start(t, func(c *daemon.Config) {
		c.LoginRateMax = 2
		c.LoginRateRefill = time.Hour
	})
	creds := d.Credentials()
	a := creds.ControllerAgent
	for i := 0; i < 2; i++ {
		c := testkit.Dial(t, d, creds.ControllerModelUUID)
		if _, err := c.LoginAgent(testkit.Ctx(t), a.Tag, a.Password, a.Nonce); err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
	}
	c := testkit.Dial(t, d, creds.ControllerModelUUID)
	_, err := c.LoginAgent(testkit.Ctx(t), a.Tag, a.Password, a.Nonce)
	testkit.WantErr(t, err, "try again", params.CodeTryAgain)
	// Users are not limited.
	if _, err := c.LoginUser(testkit.Ctx(t), "admin", creds.AdminPassword); err != nil {
		t.Fatalf("user login under agent rate limit: %v", err)
	}
}
