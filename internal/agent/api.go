package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The facades the agent speaks, at the versions Juju 3.3's agents use.
const (
	provisionerFacade  = "Provisioner"
	provisionerVersion = 11
	caasFacade         = "CAASUnitProvisioner"
	caasVersion        = 2
	modelAdminFacade   = "ModelAdmin"
	modelAdminVersion  = 1
)

// errStopped ends a worker's run for good (its machine is dead, its
// model gone): the supervisor does not restart it.
var errStopped = errors.New("stopped")

// dialer connects to the daemon named by the credentials.
type dialer struct {
	addrs  []string
	caCert []byte
	cfg    Config
	log    *slog.Logger
}

// dial connects to the model endpoint of model ("" for /api), trying each
// address in turn.
func (d *dialer) dial(ctx context.Context, model string) (*client.Conn, error) {
	var errs []error
	for _, addr := range d.addrs {
		c, err := client.Dial(ctx, client.Config{
			Addr: addr, ModelUUID: model, CACert: d.caCert, DialTimeout: d.cfg.DialTimeout,
			Logger: d.log, ReadBufferSize: d.cfg.BufferSize, WriteBufferSize: d.cfg.BufferSize,
		})
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// login dials model and logs in as the agent tag; it starts the Go
// client's pinger, as Juju's agents ping every minute.
func (d *dialer) login(ctx context.Context, model, tag, password, nonce string) (*client.Conn, error) {
	c, err := d.dial(ctx, model)
	if err != nil {
		return nil, err
	}
	if _, err := c.LoginAgent(ctx, tag, password, nonce); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("login as %s: %w", tag, err)
	}
	c.StartPinger(d.cfg.PingInterval)
	return c, nil
}

// loginUser dials model and logs in as an operator.
func (d *dialer) loginUser(ctx context.Context, model, user, password string) (*client.Conn, error) {
	c, err := d.dial(ctx, model)
	if err != nil {
		return nil, err
	}
	if _, err := c.LoginUser(ctx, user, password); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("login as %s: %w", user, err)
	}
	return c, nil
}

// call makes one call and decodes its result into a new R.
func call[R any](ctx context.Context, c *client.Conn, facade string, version int, method string, args any) (R, error) {
	var res R
	err := c.Call(ctx, facade, version, "", method, args, &res)
	return res, err
}

// prov calls a Provisioner v11 method.
func prov[R any](ctx context.Context, c *client.Conn, method string, args any) (R, error) {
	return call[R](ctx, c, provisionerFacade, provisionerVersion, method, args)
}

// caas calls a CAASUnitProvisioner v2 method.
func caas[R any](ctx context.Context, c *client.Conn, method string, args any) (R, error) {
	return call[R](ctx, c, caasFacade, caasVersion, method, args)
}

// admin calls a ModelAdmin v1 method.
func admin[R any](ctx context.Context, c *client.Conn, method string, args any) (R, error) {
	return call[R](ctx, c, modelAdminFacade, modelAdminVersion, method, args)
}

// watchFrom makes the Watch call method of facade with provisiond's own
// "from-revision" header key (docs/history.md, "Resuming a watch"): the
// watcher it opens resumes after revision from, its initial event being
// only what changed since, and it and each of its events report the
// revision up to which they cover every change, which the caller keeps
// to resume from after its next reconnection, on this daemon or another.
// With from 0 it is a fresh watcher (the whole initial event). When the
// daemon answers watcher reset (the history after from is no longer
// kept), it watches afresh; resumed says whether the result is a
// resumption (false: the initial event is the full one).
func watchFrom[R any](ctx context.Context, c *client.Conn, log *slog.Logger, facade string, version int, method string, args any, from uint64) (res R, rev uint64, resumed bool, err error) {
	if from > 0 {
		rev, err = c.CallFrom(ctx, facade, version, "", method, from, args, &res)
		if err == nil {
			// A watcher that cannot resume reports no revision: its
			// initial event is the full one.
			return res, rev, rev > 0, nil
		}
		if !errors.Is(err, client.ErrWatcherReset) {
			return res, 0, false, err
		}
		log.Info("the history after the revision to resume from is gone; watching afresh", "watch", method, "from", from)
		res = *new(R)
	}
	rev, err = c.CallFrom(ctx, facade, version, "", method, 0, args, &res)
	return res, rev, false, err
}

// mergeIDs is the union of two lists of ids, a's order first.
func mergeIDs(a, b []string) []string {
	if len(a) == 0 {
		return b
	}
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, l := range [][]string{a, b} {
		for _, id := range l {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

func entities(tags ...string) params.Entities {
	es := make([]params.Entity, len(tags))
	for i, t := range tags {
		es[i] = params.Entity{Tag: t}
	}
	return params.Entities{Entities: es}
}

// itemError returns the error of the only item of a bulk call's ErrorResults.
func itemError(res params.ErrorResults, err error) error {
	if err != nil {
		return err
	}
	if len(res.Results) != 1 {
		return fmt.Errorf("got %d results for 1 item", len(res.Results))
	}
	if e := res.Results[0].Error; e != nil {
		return e
	}
	return nil
}

// one calls a bulk Provisioner method that reports only errors with one
// item.
func one(ctx context.Context, c *client.Conn, method string, args any) error {
	return itemError(prov[params.ErrorResults](ctx, c, method, args))
}

// setStatus sets one status through method (SetStatus, SetInstanceStatus).
func setStatus(ctx context.Context, c *client.Conn, method, tag, status, info string, data map[string]any) error {
	return one(ctx, c, method, params.SetStatus{Entities: []params.EntityStatusArgs{{Tag: tag, Status: status, Info: info, Data: data}}})
}

// machineTag is the tag of machine id ("0/lxd/1" -> "machine-0-lxd-1").
func machineTag(id string) string { return "machine-" + strings.ReplaceAll(id, "/", "-") }

// randomPassword is a fresh agent password (Juju's are 24 random bytes,
// well over its 18-character minimum).
func randomPassword() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// newNonce is a machine nonce as Juju's provisioners make them:
// "<provisioner tag>:<random>".
func newNonce(provisioner string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s:%x-%x-%x-%x-%x", provisioner, b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// isCode reports whether err carries one of the codes.
func isCode(err error, codes ...string) bool {
	for _, c := range codes {
		if client.IsCode(err, c) {
			return true
		}
	}
	return false
}

// connLost reports whether err means the connection is gone (the daemon
// went away): the worker's run ends and the supervisor reconnects.
func connLost(err error) bool { return errors.Is(err, client.ErrConnClosed) }
