//go:build !linux

package connlimit

import "net/netip"

// peerLookup finds the owner of a local client's socket on Linux only;
// elsewhere every local client is one client, and none is the operator.
type peerLookup struct{}

func newPeerLookup() *peerLookup { return &peerLookup{} }

func (*peerLookup) uid(local, remote netip.AddrPort) (uint32, bool) { return 0, false }

func (*peerLookup) close() {}
