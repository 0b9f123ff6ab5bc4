// Package agentbinaries serves the agent binaries of the controller's
// catalog over HTTP as Juju's apiserver serves its tools (downloads
// without credentials, uploads by superusers), from a blob store in one
// daemon's data dir, and keeps that store in line with the catalog: it
// removes the copies of entries gone from it and, on a controller of
// several daemons, copies from the other daemons what this one lacks.
//
// # Layout
//
//   - agentbinaries.go: Server, the routes (download, upload), fetching
//     an entry from its source URL.
//   - peers.go: following the catalog (Start, Stop) and copying from
//     the other daemons.
//
// # Concurrency contract
//
//  1. New adds the routes; net/http runs each request in its own
//     goroutine, and a Server is safe for concurrent use.
//  2. Start starts one goroutine, the follower, which the daemon's
//     Shutdown stops with Stop (which waits for it) before the state
//     closes. Stop on a nil Server or one never started does nothing.
//  3. One fetch of a version into the store runs at a time (a per-version
//     lock): concurrent downloads of an entry not yet stored, and copies
//     from peers, wait for the one fetch and find it stored.
//  4. A blob being stored is marked busy until its catalog entry commits
//     (or the store fails), so the follower never removes it as an entry
//     gone from the catalog.
package agentbinaries
