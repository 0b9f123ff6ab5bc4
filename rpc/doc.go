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
//   - conn.go: one connection (Conn): the reader, dispatch, request slots,
//     the reply queue and its drain, pings, teardown.
//   - server.go: Server (the upgrade, the connection cap, Shutdown) and the
//     worker pool handlers run on.
//   - limits.go: what one connection may make the server hold (request
//     bytes, list items, reply sizes, unsent bytes, pre-login limits).
//   - freeform.go: the bounds of free-form values (status data, config
//     values: an `any` in the params), checked before the method runs.
//   - wire.go: the transport under gorilla: the small read buffer, and
//     the connection whose writes the drain corks so that a batch of
//     replies is one TLS record and one syscall.
//   - idle.go: how the reader waits between requests: on the socket, with
//     only its own few frames on its stack, once nothing is left unread
//     in gorilla or crypto/tls; pongs taken there; the wait handed to a
//     new goroutine with a small stack once idle.
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
//   - The reader. Server.ServeHTTP (on net/http's goroutine for the
//     request) upgrades the connection, starts one goroutine for it and
//     returns, so net/http lets go of that goroutine and its per-request
//     state. That goroutine is the connection's reader: it alone reads the
//     socket, decodes headers and dispatches, and it tears the connection
//     down when reading ends. The Server tracks it (Shutdown waits for it).
//     An idle connection has no other goroutine. An idle reader hands its
//     wait to a new goroutine and ends (idle.go): the reader is then that
//     goroutine, and never more than one goroutine is the reader.
//   - Dispatch happens on the reader, in read order. Root.FindMethod runs
//     there and must not block. A request it refuses, or one over
//     Config.MaxRequests, is answered from the reader, so such replies keep
//     their read order. The reader itself waits (limits.go) while the
//     requests being answered hold Config.ReadLimit bytes, and before login
//     until the previous request is answered.
//   - Handlers. Every resolved request takes one of the connection's
//     MaxRequests slots and runs on a worker of the Server's pool (reused
//     goroutines; an idle worker exits after workerIdle and at Shutdown).
//     Calls on one connection run concurrently and reply in any order
//     (clients match replies by request id). A panic in a handler becomes
//     an error reply; the connection stays.
//   - What a handler may block on: its own work (state reads and writes,
//     which are bounded), its share of the connection's list-item budget
//     (Config.MaxBulkItems; given back when its reply is queued) and, when
//     it queues its reply, room in the reply queue (at most maxQueued
//     replies and Config.MaxUnsent bytes; the drain makes room or the write
//     deadline ends the connection). It must not wait for an outside event:
//     such a call returns a Later (HandleLater), holds its slot but no
//     goroutine, and is answered when something calls its reply function,
//     which never blocks: the reply joins the connection's ready replies,
//     which one worker at a time encodes and queues together, so replies
//     given together (one commit waking several of the connection's
//     watchers) are written together, in the order given (a reply given
//     while its call starts, an event already pending, is queued by the
//     handler when the start returns). Teardown waits
//     for every call to be answered, so whatever a call waits for must end
//     when Root.Kill runs or the context ends.
//   - The reply drain. A reply is encoded on the handler's goroutine and
//     queued. If no drain is running, the goroutine that queued becomes the
//     drain: it writes queued replies until the queue is empty, under the
//     write deadline, taking the whole queue each time and writing it as
//     one write of the TLS connection (wire.go), then returns to its pool (a reply the reader queues
//     starts its drain on a worker, so the reader goes on reading). One
//     drain at a time is the connection's only writer of data frames; a
//     write error closes the socket, which ends the reader, and later
//     replies are dropped.
//   - Pings are sent from a time.AfterFunc timer that the reader starts and
//     that re-arms itself after each ping until teardown begins (WriteControl
//     may run alongside the drain). A pong extends the read deadline
//     (Config.PongWait), as every read does.
//   - Contexts. The context a call gets is the connection's (with the
//     call's item share as a value): it ends when the connection does.
//     Juju requests carry no per-call cancellation.
//   - Teardown, on the reader, when reading ends (a read error, a malformed
//     message, Conn.Close from Shutdown or the facade layer): cancel the
//     context, Root.Kill (which must make waiting calls return), wait for
//     every call to be answered, wait for the drain to empty the queue,
//     send the close frame, close the socket.
//   - Observer methods are called from the reader and the handlers; they
//     must not block.
//
// rpc never imports the facade layer: it reads the wire code of an error
// from its ErrorCode method (params.Error has one), and the Registry's
// context type C is opaque to it.
package rpc
