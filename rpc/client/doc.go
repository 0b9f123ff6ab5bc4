// Package client is the Go client for provisiond's Juju-compatible RPC API
// (see specs/rpc.md). Integration tests (in this repository and others:
// see package provisiondtest for a daemon to run them against) and the
// operator CLI use it.
//
// # Connecting
//
// [DialCredentials] dials what a credentials.yaml (package credentials)
// says: each api-address in turn, verified against its ca-cert; then
// [Conn.LoginAdmin] or [Conn.LoginControllerAgent] log in with its logins.
//
// [Dial] opens wss://Addr/api (controller login) or
// wss://Addr/model/<uuid>/api (model login) with TLS verified against
// Config.CACert and Config.ServerName ("juju-apiserver" by default), then
// returns a [*Conn]. Authenticate with [Conn.Login], [Conn.LoginUser] or
// [Conn.LoginAgent]. [DialRaw] does the same TLS and path handling but returns
// the bare gorilla connection, for wire tests that need to send malformed
// frames.
//
// # Typed facade clients
//
// [Provisioner] (machine Provisioner v11), [CAASUnitProvisioner] (v2) and
// [ModelAdmin] (provisiond's operator facade, v1) have one method per
// facade method, taking and returning the wire types of package params.
// Bulk methods return one result per argument item (a reply with another
// count is an error), each with its own *params.Error. [Provisioner.Machine]
// and [CAASUnitProvisioner.Application] are the one-entity views Juju's
// workers use: each method makes the one-item call and returns the item's
// error. Errors match the code values ([ErrNotFound], ...) with errors.Is.
//
// Watch methods that return one watcher start a [NotifyWatch] or
// [StringsWatch]: a goroutine of the watch calls Next and sends on
// Changes (the first value at once, as Juju's api/watcher does) until Stop,
// which stops the watcher on the server and waits for the goroutine; the
// watch also ends, closing Changes and setting Err, when its connection
// ends. [NotifyWatcher] and [StringsWatcher] drive a watcher by id with
// explicit Next calls instead.
//
// A watch can resume after a reconnection, on the same daemon or another
// of the controller (docs/history.md, "Resuming a watch"): opened with
// provisiond's "from-revision" header key ([Conn.CallFrom],
// [NewStringsWatchFrom], [NewNotifyWatchFrom], the typed *From methods),
// its Revision says up to which revision the values received cover every
// change; opened again from it, its first value is only what changed
// since (a notify watch sends one only if its thing changed), or it fails
// with [ErrWatcherReset] when the daemon no longer keeps that history.
// Juju's clients never send the key, and the bytes of their calls and
// replies are unchanged.
//
// # Goroutine ownership
//
// A Conn owns one goroutine while it is idle (a running watch owns one
// more, see above):
//   - exactly one reader, started by Dial, which reads every message, matches
//     replies to pending calls by request-id and records why the connection
//     ended. While it dispatches what one read brought, the calls sent
//     (from Go completions, or by other goroutines) are gathered and leave
//     in one write when it next reads (wire.go);
//   - optionally a pinger, started by [Conn.StartPinger], which holds no
//     goroutine while it waits: a timer's function sends Pinger.Ping with
//     [Conn.Go], the reply (on the reader) arms the next, and another timer
//     closes the connection when a ping fails or goes unanswered longer
//     than Config.PingTimeout (30 s). Each timer's function is counted
//     while it runs (a ping's write, the close).
//
// [Conn.Close] sends a close frame (code 1000), closes the socket, stops
// the pinger's timers and waits until the reader and any timer's function
// have returned, so no goroutine of this package outlives Close. Callers
// must call Close even when the connection has already broken.
//
// # Concurrency contract
//
// All methods of Conn, NotifyWatcher and StringsWatcher are safe for
// concurrent use. Calls are multiplexed: each gets a fresh request-id
// (counting up from 1 per connection), outgoing messages are serialised by a
// mutex with a 10 s write deadline, and replies may arrive in any order.
// A call whose context ends returns ctx.Err() at once; its reply, if it comes
// later, is dropped. [Conn.Go] (and [StringsWatcher.GoNext]) start a call
// without parking the caller: its completion runs on the reader goroutine,
// so a process holding thousands of watchers needs no goroutine per pending
// Next. Once the connection ends (peer close, read or write
// failure, read-limit exceeded, failed ping, Close), [Conn.Done] is closed and
// every pending and later call fails with an error wrapping [ErrConnClosed]
// and the cause; [Conn.Err] and [Conn.CloseCode] report the cause and the
// WebSocket close code.
//
// # Errors
//
// A reply carrying an "error" key (V1) or "Error" key (legacy V0) is returned
// as a *params.Error with Message, Code ("error-code"/"ErrorCode") and Info
// ("error-info"). Like python-libjuju, the client treats the mere presence of
// the key as failure. Test codes with errors.Is against the code values
// ([ErrNotFound], [ErrUnauthorized], ..., one per code of package params),
// which match a call's error and a bulk result item's *params.Error alike;
// errors.As with a *params.Error gives the message and info. [IsCode] and
// params.ErrCode take a code as a string.
package client
