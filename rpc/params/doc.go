// Package params holds the wire types of the Juju API served by provisiond:
// the message bodies of every facade method, with JSON keys exactly as in
// Juju's facade schema (protocol/facades-schema.json in the shared specs), and
// the error type and codes carried on the wire.
//
// It imports only the standard library and internal/jsonscan (the
// scanners behind Entities.DecodeFast), so both the server (rpc, facades)
// and the client (rpc/client) use it.
//
// Rules the types follow (see specs/rpc.md §4):
//   - a per-item error is a *Error with omitempty: never "error": null;
//   - Error.Code is always present on the wire, possibly "";
//   - NotifyWatchResult uses the capitalised key "NotifyWatcherId", as Juju does.
package params
