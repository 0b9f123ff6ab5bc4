// Package facade holds what every facade shares: the per-call Context, the
// per-connection Session (the rpc.Root that switches from the login-only
// root to the full API after Admin.Login), authorisation helpers, the bulk
// helper, and ServerError, the one place where errors become wire codes.
//
// # Concurrency
//
// A Session belongs to one connection; rpc calls its FindMethod from the
// connection's reader goroutine and the returned callers from handler
// goroutines, concurrently. Its mutable state (the login) is guarded by a
// mutex and set once. Kill runs once when the connection ends and stops the
// connection's resources, which makes blocked watcher calls return.
package facade
