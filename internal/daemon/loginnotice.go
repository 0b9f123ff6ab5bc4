package daemon

import (
	"context"
	"encoding/json"

	"github.com/provisiond/provisiond/internal/connlimit"
	"github.com/provisiond/provisiond/rpc"
)

// noticeLogins wraps NewRoot so that a connection stops counting as
// pending (connlimit.Listener) once its websocket logs in.
func (d *Daemon) noticeLogins(newRoot func(rpc.ConnInfo, *rpc.Conn) rpc.Root) func(rpc.ConnInfo, *rpc.Conn) rpc.Root {
	return func(info rpc.ConnInfo, c *rpc.Conn) rpc.Root {
		root := newRoot(info, c)
		if d.tcp == nil {
			return root
		}
		if _, operator, ok := d.tcp.Client(info.RemoteAddr); !ok || operator {
			return root // the operator's connections are not counted
		}
		return &loginNotice{Root: root, tcp: d.tcp, remote: info.RemoteAddr}
	}
}

// loginNotice tells the listener when its connection's login succeeds.
type loginNotice struct {
	rpc.Root
	tcp    *connlimit.Listener
	remote string
}

// Authenticated forwards rpc.Authenticator (as auditRoot does).
func (r *loginNotice) Authenticated() bool {
	a, ok := r.Root.(rpc.Authenticator)
	return !ok || a.Authenticated()
}

func (r *loginNotice) FindMethod(req rpc.Request) (rpc.Caller, error) {
	call, err := r.Root.FindMethod(req)
	if err != nil || req.Facade != "Admin" || req.Method != "Login" {
		return call, err
	}
	return rpc.CallerFunc(func(ctx context.Context, params json.RawMessage) (any, error) {
		res, err := call.Call(ctx, params)
		if err == nil {
			r.tcp.LoggedIn(r.remote)
		}
		return res, err
	}), nil
}
