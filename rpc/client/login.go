package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/provisiond/provisiond/rpc/params"
)

// ClientVersion is the client-version LoginUser and LoginAgent send.
const ClientVersion = "3.3.0"

// Login calls Admin v3 Login. On success it checks the result the way
// Juju's Go client does (model-tag must name the dialled model when
// Config.ModelUUID is set; controller-tag and server-version must be
// present), records it for LoginResult and returns it.
func (c *Conn) Login(ctx context.Context, req params.LoginRequest) (*params.LoginResult, error) {
	var res params.LoginResult
	if err := c.Call(ctx, "Admin", 3, "", "Login", req, &res); err != nil {
		return nil, err
	}
	if uuid := c.cfg.ModelUUID; uuid != "" {
		if want := "model-" + uuid; res.ModelTag != want {
			return nil, fmt.Errorf("mismatched model tag in login result (got %q want %q)", res.ModelTag, want)
		}
	}
	if !strings.HasPrefix(res.ControllerTag, "controller-") || len(res.ControllerTag) == len("controller-") {
		return nil, fmt.Errorf("invalid controller tag in login result %q", res.ControllerTag)
	}
	if res.ServerVersion == "" {
		return nil, fmt.Errorf("no server version in login result")
	}
	c.mu.Lock()
	c.loginResult = &res
	c.mu.Unlock()
	out := res
	return &out, nil
}

// LoginUser logs in as user name (auth-tag "user-<name>") with a password.
func (c *Conn) LoginUser(ctx context.Context, name, password string) (*params.LoginResult, error) {
	return c.Login(ctx, params.LoginRequest{
		AuthTag:       "user-" + name,
		Credentials:   password,
		ClientVersion: ClientVersion,
	})
}

// LoginAgent logs in as an agent (tag such as "machine-0" or
// "unit-app-0"); nonce is needed by machine agents only.
func (c *Conn) LoginAgent(ctx context.Context, tag, password, nonce string) (*params.LoginResult, error) {
	return c.Login(ctx, params.LoginRequest{
		AuthTag:       tag,
		Credentials:   password,
		Nonce:         nonce,
		ClientVersion: ClientVersion,
	})
}

// LoginResult returns a copy of the result of the last successful login, or
// nil before one.
func (c *Conn) LoginResult() *params.LoginResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loginResult == nil {
		return nil
	}
	out := *c.loginResult
	return &out
}
