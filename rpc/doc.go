// Package rpc is the server side of Juju's API wire protocol: JSON requests
// and replies over a websocket (specs/rpc.md), V1 framing and the legacy
// V0 one, the typed method registry facades register into, and the
// http.Handler that upgrades API connections and tracks them.
//
// # Layout
//
//   - codec.go: the request header and the reply frame. The usual V1 form
//     is decoded without encoding/json; anything else goes through
//     encoding/json, which defines the behaviour.
//   - registry.go: Registry, where each facade version registers typed
//     methods. Each method is composed once, at registration, into one
//     function that builds the facade instance, decodes the params and calls
//     the method: no reflection runs per call.
//   - conn.go: one connection (Conn): its reader, dispatch, request slots,
//     the reply queue, its on-demand writer (which also sends the pings),
//     teardown.
//   - server.go: Server (the upgrade, the connection cap, Shutdown) and the
//     worker pool handlers run on.
//   - limits.go: what one connection may make the server hold (request
//     bytes, list items, reply sizes, unsent bytes, pre-login limits).
//   - freeform.go: the bounds of free-form values (status data, config
//     values: an `any` in the params), checked before the method runs.
//   - wire.go: the transport under gorilla: the small read buffer, and
//     the connection whose writes the writer corks so that a batch of
//     replies is one TLS record and one syscall.
//
// # Dispatch: one lookup, one call
//
// For each request the reader asks the connection's Root (the facade
// layer's per-connection session) to resolve it, once: Root.FindMethod
// checks what the connection may reach, finds the Method in the Registry
// and returns a Caller bound to the call's context. The handler then makes
// one call: Caller.Call runs the Method's composed function (facade
// constructor, params decoding, the list-item count of limits.go, the
// free-form value check of freeform.go, the typed method) and maps its
// error to the wire. A params type may decode its usual form without encoding/json
// by implementing FastDecoder (params.Entities does).
//
// # Concurrency contract
//
// A connection is served by one reader, which lives as long as it does,
// and one writer at a time, as in etcd's v3rpc and gorilla's chat
// example, except that the writer runs only while there is something to
// write: an idle connection holds one goroutine (its reader's 4 KiB
// stack), not two. Handlers and the writer run on the Server's worker
// pool.
//
//  1. The reader. Server.ServeHTTP upgrades the connection, starts its
//     reader and returns (net/http lets go of its goroutine and request
//     state). The reader starts the ping timer; it alone reads the socket,
//     decodes headers and dispatches, and it tears the connection down
//     when reading ends. The Server tracks it: Shutdown waits for it, and
//     it ends only after the writer has stopped.
//  2. Dispatch happens on the reader, in read order. Root.FindMethod runs
//     there and must not block. A request it refuses, or one over
//     Config.MaxRequests, is answered from the reader, so such replies
//     keep their read order. The reader waits (limits.go) while the
//     requests being answered hold Config.ReadLimit bytes, and before
//     login until the previous request is answered.
//  3. Handlers. Each resolved request takes one of MaxRequests slots and
//     runs on a worker of the pool. Calls on one connection run
//     concurrently and reply in any order (clients match replies by
//     request id). A panic in a handler becomes an error reply.
//  4. A handler's reply is encoded on the handler and queued; queueing
//     waits for room (maxQueued replies, Config.MaxUnsent bytes; a reply
//     alone may be larger), so a client that stops reading stops being
//     read. That, its own work and its share of Config.MaxBulkItems are
//     all a handler may wait for: a call that waits for an outside event
//     returns a Later (HandleLater), keeps its slot, holds no goroutine,
//     and is answered when its reply function is called, from any
//     goroutine; that never blocks: the reply joins the queue, and the
//     writer encodes it.
//  5. The writer is the only goroutine that writes data frames and pings
//     (gorilla writes pongs and close frames from the reader, which its
//     WriteControl allows). It runs on demand, started by whoever queues a
//     reply or by the ping timer unless it runs (the flag and the queue
//     share one mutex): a handler runs it on its own worker once its
//     reply is queued, anyone else starts it on the pool (the reader and a
//     Later's reply function must not be held). It stops, under that mutex,
//     only once the queue is empty and no ping is due, so there is one
//     writer at a time and nothing queued is left unwritten. It takes the
//     whole queue and writes it, in the order queued, as one corked write
//     of the TLS connection (wire.go): one record and one syscall per
//     batch, cut at corkMax and MaxUnsent bytes. After encoding replies
//     of Later calls it calls Config.Settle, if set, and takes what was
//     queued meanwhile into the same write: the daemon's waits there for
//     the watcher hub's publish under way, so the replies one commit
//     gives a connection leave in one record. Every
//     write has the write deadline (Config.WriteTimeout); a failed write
//     closes the socket, which ends the reader, and the replies queued
//     then and later are dropped, their room given back.
//  6. Pings go out every Config.PingPeriod from the writer, which a timer
//     (no goroutine) starts; a pong, like every read, extends the read
//     deadline (Config.PongWait), and a ping written while none is
//     unanswered moves it to PongWait after the ping, so a client always
//     has the whole pong wait to answer, however late the timer or the
//     writer ran.
//  7. Contexts. A call's context is the connection's (with the call's
//     item share as a value): it ends when reading ends. Juju requests
//     carry no per-call cancellation.
//  8. Teardown, on the reader, once reading ends (a read error, a
//     malformed message, Conn.Close from Shutdown or the facade layer)
//     and, in a stop, once Shutdown has told every connection to close,
//     in order: cancel the context; in a stop, drop the replies of Later
//     calls from then on, unencoded (a waiting Next's watcher is the
//     connection's: what it would be told is moot); Root.Kill, which must
//     make waiting calls return; wait for every call to be answered and
//     the writer, if one runs, to have written everything queued and
//     stopped; stop the ping timer (no writer starts again); send the
//     close frame; close the socket; leave the server's set of
//     connections, which takes no lock of the server's (Shutdown ends
//     thousands of connections at once). No goroutine of the connection
//     outlives it.
//  9. Observer methods are called from the reader, the handlers and the
//     writer; they must not block. ConnClosed gets why the connection
//     ended (EndReasons: the first cause found, so a read that fails
//     because a write failed or Close was called keeps that cause), which
//     is also logged at debug level unless the client closed it.
//
// rpc never imports the facade layer: it reads the wire code of an error
// from its ErrorCode method (params.Error has one), and the Registry's
// context type C is opaque to it.
package rpc
