package etcdstore

import (
	"context"

	"github.com/provisiond/provisiond/state/store"
)

var _ store.Inspector = (*Store)(nil)

// Inspect reports the store's figures (store.Inspector) from what it
// already knows, asking etcd nothing: the revision applied, the latest
// compaction this process made (Compact) or its watch ran into, and each
// member as the member watch last heard it. The store's size is the
// largest member's database, its quota the smallest member's: the first
// member to reach its quota raises the NOSPACE alarm that stops every
// write. etcd keeps no layout version of the store's own.
func (s *Store) Inspect(ctx context.Context) (store.Inspection, error) {
	if err := ctx.Err(); err != nil {
		return store.Inspection{}, err
	}
	if s.isClosed() {
		return store.Inspection{}, store.ErrClosed
	}
	in := store.Inspection{Info: s.Info(), CompactRevision: uint64(max(s.compacted.Load(), 0))}
	for _, m := range s.Members() {
		in.Members = append(in.Members, store.Member{Endpoint: m.Endpoint, Up: m.Up, Err: m.Err,
			SizeBytes: m.DBSize, InUseBytes: m.DBSizeInUse, QuotaBytes: m.DBQuota, Alarms: m.Alarms, At: m.At})
		in.SizeBytes = max(in.SizeBytes, m.DBSize)
		in.InUseBytes = max(in.InUseBytes, m.DBSizeInUse)
		if m.DBQuota > 0 && (in.QuotaBytes == 0 || m.DBQuota < in.QuotaBytes) {
			in.QuotaBytes = m.DBQuota
		}
	}
	return in, nil
}

// noteCompacted records that etcd's history is compacted up to rev.
func (s *Store) noteCompacted(rev int64) {
	for {
		old := s.compacted.Load()
		if rev <= old || s.compacted.CompareAndSwap(old, rev) {
			return
		}
	}
}
