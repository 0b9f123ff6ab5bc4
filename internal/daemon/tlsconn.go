package daemon

import "crypto/tls"

// apiTLS sets what the API listener's TLS does per connection
// (docs/performance.md, "per-connection costs"):
//
//   - Records are sized by what is written, up to 16 KiB: the rpc writer
//     writes the replies it found queued together in one write, which is
//     then one record and one syscall. (crypto/tls's dynamic record sizing
//     starts each connection with records of one TCP segment, growing
//     over the first ones, for browsers that render as bytes arrive.)
//   - Session tickets are offered (crypto/tls's default, stated here so
//     nobody turns them off unawares): a client that keeps sessions (our
//     rpc/client does) reconnects with an abbreviated handshake. The
//     ticket keys are crypto/tls's own, random per daemon process, kept
//     in memory only and rotated daily (a key decrypts tickets for 7
//     days). So a ticket resumes on the daemon that issued it, not on the
//     other daemons of an etcd-mode controller nor after a restart.
//     Sharing them would mean a new secret in the store and its backups
//     that decrypts the resumption secret of every agent's session, or
//     keys derived from the long-lived server key that a later theft of
//     it would turn into every past session's resumption secret; for
//     what it saves (a signature and a certificate check per reconnect,
//     and Juju's own agents keep no sessions) neither is worth it.
func apiTLS(cfg *tls.Config) {
	cfg.DynamicRecordSizingDisabled = true
	cfg.SessionTicketsDisabled = false
}
