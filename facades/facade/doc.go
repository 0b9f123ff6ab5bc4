// Package facade holds what every facade shares: the per-call Context, the
// per-connection Session (the rpc.Root that switches from the login-only
// root to the full API after Admin.Login), authorisation helpers, the bulk
// helper, and the error table (errors.go), the one place where errors
// become wire codes and where failed calls are logged.
//
// # Concurrency
//
// A Session belongs to one connection; rpc calls its FindMethod from the
// connection's reader goroutine and the returned callers from handler
// goroutines, concurrently. Its mutable state (the login) is guarded by a
// mutex and set once. FindMethod snapshots the login into the call's
// Context, so a Context is never shared between calls and is read-only
// once the call runs. Kill runs once when the connection ends and stops the
// connection's resources, which makes blocked watcher calls return.
package facade
