// Package daemon wires provisiond together: state over bbolt, the watcher
// hub, the facades, the rpc server, TLS, metrics and the HTTP listener. It
// is what `provisiond serve` runs, and what tests and provisionbench start
// in-process; nothing else wires concrete types.
//
// # Goroutines
//
// Start owns: the HTTP server's accept loop (net/http's per-connection
// goroutines run the TLS handshake, waiting first for a slot of the
// handshake gate, internal/connlimit, and the websocket upgrade, then return:
// rpc.Server starts and tracks each API connection's reader, see package
// rpc), the state's committer. Shutdown stops accepting, closes every API connection (which
// stops their watchers), waits for them, then closes the state. On a store
// several daemons share, Start also starts the cluster's goroutines (the
// API servers' follower, presence's publisher and follower, the balancer,
// compaction under election: cluster.go, presence.go, balance.go), which
// Shutdown stops before it closes the state. Done is closed when the HTTP
// server has stopped for any reason.
package daemon
