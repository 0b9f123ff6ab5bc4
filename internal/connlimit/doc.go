// Package connlimit bounds what clients may make the daemon hold before
// they log in: the listener that caps accepted TCP connections and, within
// the cap, those that have not logged in, in all and per client (an IPv4
// address, an IPv6 /64, a local user told by the owner of its socket), and
// that sheds new ones while the process is overloaded; and the gate that
// orders and bounds the TLS handshakes doing their work at once. It knows nothing of the API: the daemon tells the Listener when a
// connection logs in, and names clients as the login throttle does.
//
// # Layout
//
//   - listener.go: Listener (the cap, the pending bounds, the local
//     operator's share) and the default cap sized to the box
//     (DefaultMaxConns).
//   - handshake.go: HandshakeGate, the slots of TLS handshakes, served
//     newest first, lone clients before crowded ones, the operator first.
//   - overload.go: Overload, which sheds new connections while the
//     process's goroutines wait too long to run (the runtime's
//     /sched/latencies:seconds), and that histogram at fixed bounds for
//     the daemon's metrics (SchedLatencies).
//   - peer_linux.go: the owner of a local client's socket
//     (NETLINK_SOCK_DIAG); elsewhere none is known (peer_other.go).
//
// # Concurrency contract
//
//  1. A Listener is used as a net.Listener: one goroutine (the HTTP
//     server's accept loop) calls Accept; Close, Open, Pending, Client and
//     LoggedIn are safe from any goroutine. Connections over a bound are
//     closed inside Accept and never returned.
//  2. A Listener's connections are counted out once, at their first
//     Close, from whichever goroutine closes them; once the Listener is
//     closed, closes are not counted out.
//  3. A HandshakeGate is safe for concurrent use. A handshake waits for a
//     slot in its own goroutine (net/http's for the connection, inside
//     the TLS config's GetConfigForClient); the package starts no
//     goroutine and holds none after Close.
//  4. A slot is given back at the connection's first read after the
//     server's flight was written, at its close, or by ReleaseSlot
//     (http.Server.ConnState once it is served), whichever comes first:
//     never later than the handshake's own work.
//  5. An Overload is safe for concurrent use and starts no goroutine: it
//     reads the runtime's histogram at most once a period, from whichever
//     goroutine asks (the accept loop, a metrics scrape), under its lock.
//  6. The callbacks (a Listener's refused, a gate's dropped and refused,
//     the clientOf function) are called without the package's locks held
//     and must not block; a gate's trace (tests) is called with its lock
//     held.
package connlimit
