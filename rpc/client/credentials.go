package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/rpc/params"
)

// DialCredentials dials the daemon that wrote creds (a credentials.yaml,
// see package credentials): each of its api-addresses in order until one
// answers, verifying the server against its ca-cert. cfg gives the rest
// (ModelUUID, DialTimeout, Logger, ...); its Addr and CACert are replaced.
// The errors of every address tried are joined when none answers. The
// caller must Close the returned Conn and log in (LoginAdmin,
// LoginControllerAgent, LoginUser or LoginAgent).
func DialCredentials(ctx context.Context, creds *credentials.Credentials, cfg Config) (*Conn, error) {
	if creds == nil || len(creds.APIAddresses) == 0 {
		return nil, errors.New("client: the credentials list no api-addresses")
	}
	cfg.CACert = []byte(creds.CACert)
	var errs []error
	for _, addr := range creds.APIAddresses {
		cfg.Addr = addr
		c, err := Dial(ctx, cfg)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("client: cannot connect to any api-address: %w", errors.Join(errs...))
}

// DialCredentialsFile reads a credentials.yaml (credentials.Read) and
// dials it with DialCredentials.
func DialCredentialsFile(ctx context.Context, path string, cfg Config) (*Conn, error) {
	creds, err := credentials.Read(path)
	if err != nil {
		return nil, err
	}
	return DialCredentials(ctx, creds, cfg)
}

// LoginAdmin logs in as the admin user of creds (admin-user, "admin" when
// empty, with admin-password). It fails without a network call when creds
// has no admin password (a credentials.yaml the daemon rewrote after it
// was lost).
func (c *Conn) LoginAdmin(ctx context.Context, creds *credentials.Credentials) (*params.LoginResult, error) {
	if creds == nil || creds.AdminPassword == "" {
		return nil, errors.New("client: the credentials have no admin-password")
	}
	user := creds.AdminUser
	if user == "" {
		user = "admin"
	}
	return c.LoginUser(ctx, user, creds.AdminPassword)
}

// LoginControllerAgent logs in as the controller agent of creds
// (controller-agent: machine-0 of the controller model, with its password
// and nonce). It may log in on the controller model, on /api, and on any
// hosted model, where it is the machine Provisioner of top-level machines.
func (c *Conn) LoginControllerAgent(ctx context.Context, creds *credentials.Credentials) (*params.LoginResult, error) {
	if creds == nil || creds.ControllerAgent.Password == "" {
		return nil, errors.New("client: the credentials have no controller-agent password")
	}
	a := creds.ControllerAgent
	return c.LoginAgent(ctx, a.Tag, a.Password, a.Nonce)
}
