package etcdstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
)

// The history's archive. A commit's history record is written in the
// commit's own transaction on the feed key; the archiver (ArchiveHistory,
// run by the daemon leading the "compactor" election before it compacts)
// copies the records from etcd's history of the feed key, once their
// revisions are known, to keys of their own, in batches:
//
//	HistoryArchive + prefix + "r/" + the batch's newest revision, 20 digits
//	   -> version 1, then for each record: its revision, its length, its bytes
//	HistoryArchive + prefix + "mark"
//	   -> version 1, the newest revision archived, the records and bytes
//	      kept, and the newest revision lost (0: none; absent in a mark
//	      written before it was kept, read as 0)
//
// and the compactor never compacts past the newest revision archived (the
// mark), so etcd's history needs to hold only one compaction interval.
// Every write of the archive (a batch and the mark, or the pruner's
// deletes and the mark) is one etcd transaction that compares the mark's
// mod revision with the one read: of two archivers (an old leader that
// has not yet seen it lost the election, and the new one), one commits and
// the other reads the mark again, so a record is archived once, and none
// is skipped.
//
// The archive is outside the prefix (as the prefix registry is): the
// replica loads and watches every key under the prefix, and the archive
// (days of commits) is for reading back on demand, not for every daemon's
// memory. With etcd's auth enabled the daemons' role needs readwrite on
// the keys under HistoryArchive + prefix.
//
// A batch holds up to archiveBatchBytes of records (at least one
// revision's; a revision is never split): a key per commit costs etcd
// about 36% over the records' own bytes in its database (measured:
// 20,000 records of 330 bytes took 9.0 MB in use as a key each, 6.7 MB as
// 105 keys of 64 KiB) and a key index entry in every member's memory, and
// bounds an archiving transaction to etcd's --max-txn-ops records.

// HistoryArchive is the etcd key prefix under which each controller's
// history archive is kept (HistoryArchive + the controller's prefix).
const HistoryArchive = "provisiond/history"

// archiveBatchBytes is the size a batch of the archive is closed at.
const archiveBatchBytes = 64 << 10

// archiveVersion is the first byte of a batch and of the mark.
const archiveVersion = 1

// archiveBatchPrefix is the etcd key prefix of the archive's batches.
func (s *Store) archiveBatchPrefix() string { return HistoryArchive + s.prefix + "r/" }

// archiveMarkKey is the etcd key of the archive's mark.
func (s *Store) archiveMarkKey() string { return HistoryArchive + s.prefix + "mark" }

// archiveKey is the key of the batch whose newest revision is rev.
func (s *Store) archiveKey(rev int64) string {
	return fmt.Sprintf("%s%020d", s.archiveBatchPrefix(), rev)
}

// mark is the archive's mark as read, with its mod revision (0: none
// yet).
type mark struct {
	rev            uint64 // every revision up to it is archived (or was pruned, or lost)
	records, bytes int64  // the records and bytes of the batches kept
	// lost is the newest revision whose records etcd compacted away
	// before they were archived (0: none): the history is whole only
	// after it.
	lost uint64
	mod  int64
}

func (m mark) encode() string {
	b := []byte{archiveVersion}
	b = binary.AppendUvarint(b, m.rev)
	b = binary.AppendUvarint(b, uint64(m.records))
	b = binary.AppendUvarint(b, uint64(m.bytes))
	b = binary.AppendUvarint(b, m.lost)
	return string(b)
}

var errBadArchive = errors.New("etcdstore: malformed history archive")

// readMark reads the archive's mark (a linearizable read).
func (s *Store) readMark(ctx context.Context) (mark, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Get(rctx, s.archiveMarkKey())
	if err != nil {
		return mark{}, s.fail(ctx, "reading the history archive's mark", err)
	}
	if len(resp.Kvs) == 0 {
		return mark{}, nil
	}
	kv := resp.Kvs[0]
	b := kv.Value
	if len(b) == 0 || b[0] != archiveVersion {
		return mark{}, errBadArchive
	}
	b = b[1:]
	var f [3]uint64
	for i := range f {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return mark{}, errBadArchive
		}
		f[i], b = v, b[n:]
	}
	m := mark{rev: f[0], records: int64(f[1]), bytes: int64(f[2]), mod: kv.ModRevision}
	if len(b) > 0 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return mark{}, errBadArchive
		}
		m.lost = v
	}
	return m, nil
}

// appendArchived appends a record of revision rev to a batch.
func appendArchived(b []byte, rev int64, rec []byte) []byte {
	if len(b) == 0 {
		b = append(b, archiveVersion)
	}
	b = binary.AppendUvarint(b, uint64(rev))
	b = binary.AppendUvarint(b, uint64(len(rec)))
	return append(b, rec...)
}

// decodeBatch calls fn with each revision of a batch and its records
// (slices of b), in revision order, until fn returns false.
func decodeBatch(b []byte, fn func(rev int64, recs [][]byte) (bool, error)) (bool, error) {
	if len(b) == 0 || b[0] != archiveVersion {
		return false, errBadArchive
	}
	b = b[1:]
	var cur int64
	var recs [][]byte
	for len(b) > 0 {
		rev, n := binary.Uvarint(b)
		if n <= 0 {
			return false, errBadArchive
		}
		b = b[n:]
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return false, errBadArchive
		}
		rec := b[n : n+int(l)]
		b = b[n+int(l):]
		if int64(rev) != cur && len(recs) > 0 {
			if ok, err := fn(cur, recs); !ok || err != nil {
				return ok, err
			}
			recs = nil
		}
		cur = int64(rev)
		recs = append(recs, rec)
	}
	if len(recs) > 0 {
		return fn(cur, recs)
	}
	return true, nil
}

// archiveReadPage is how many batches a read of the archive asks for at
// once (at most 4 × 64 KiB).
const archiveReadPage = 4

// archived calls fn with the archived records of the revisions after
// after, up to upto, in revision order, until fn returns false (then
// false).
func (s *Store) archived(ctx context.Context, after uint64, upto int64, fn func(rev int64, recs [][]byte) (bool, error)) (bool, error) {
	from := s.archiveKey(int64(after) + 1)
	end := clientv3.GetPrefixRangeEnd(s.archiveBatchPrefix())
	for {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Get(rctx, from, clientv3.WithRange(end), clientv3.WithLimit(archiveReadPage))
		cancel()
		if err != nil {
			return false, s.fail(ctx, "reading the history archive", err)
		}
		for _, kv := range resp.Kvs {
			stop := false
			ok, err := decodeBatch(kv.Value, func(rev int64, recs [][]byte) (bool, error) {
				if rev <= int64(after) {
					return true, nil
				}
				if rev > upto {
					stop = true
					return false, nil
				}
				return fn(rev, recs)
			})
			if errors.Is(err, errBadArchive) {
				return false, fmt.Errorf("%w (key %s)", err, kv.Key)
			}
			if err != nil {
				return false, err // fn's, as it is
			}
			if stop {
				return true, nil
			}
			if !ok {
				return false, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return true, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// ArchiveHistory copies the history records committed since the newest
// archived (up to the feed key's revision in this process's snapshot when
// it is called) from etcd's history of the feed key to the archive, a
// batch per etcd transaction, and returns the newest revision archived:
// the compactor may compact up to the revision after it. Records etcd no
// longer has (compacted without being archived, as ReclaimSpace does when
// etcd is out of space) are lost: the mark keeps the newest revision lost
// (History then fails a read across them) and a warning is logged.
func (s *Store) ArchiveHistory(ctx context.Context) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	upto := s.snap.Load().feedMod
	for {
		m, err := s.readMark(ctx)
		if err != nil {
			return 0, err
		}
		if int64(m.rev) >= upto {
			return m.rev, nil
		}
		var batch []byte
		var records int64
		var newest, scanned int64 // the newest revision with records in batch; the newest read
		compacted, err := s.feedRecords(ctx, int64(m.rev)+1, upto, func(rev int64, recs [][]byte) (bool, error) {
			size := 0
			for _, r := range recs {
				size += len(r) + 2*binary.MaxVarintLen64
			}
			if len(batch) > 0 && len(batch)+size > archiveBatchBytes {
				return false, nil // it starts the next batch
			}
			for _, r := range recs {
				batch = appendArchived(batch, rev, r)
				records++
			}
			if len(recs) > 0 {
				newest = rev
			}
			scanned = rev
			return true, nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			return m.rev, err
		}
		next := mark{rev: uint64(scanned), records: m.records + records, bytes: m.bytes, lost: m.lost}
		if compacted > 0 {
			// Nothing was read: etcd no longer has what follows the mark
			// (a compaction to revision C keeps the revisions from C on).
			s.log.Warn("history records compacted before they were archived are lost",
				"from", m.rev+1, "to", compacted-1)
			next.rev = uint64(compacted - 1)
			next.lost = max(next.lost, next.rev)
		}
		if next.rev <= m.rev {
			return m.rev, nil
		}
		ops := []clientv3.Op{}
		if len(batch) > 0 {
			next.bytes += int64(len(batch))
			ops = append(ops, opPut(s.archiveKey(newest), batch))
		}
		ops = append(ops, clientv3.OpPut(s.archiveMarkKey(), next.encode()))
		// Committed or not (another archiver moved the mark), the mark is
		// read again for the next batch.
		if _, err := s.archiveTxn(ctx, m, ops); err != nil {
			return m.rev, err
		}
	}
}

// archiveTxn commits ops if the mark is still m.
func (s *Store) archiveTxn(ctx context.Context, m mark, ops []clientv3.Op) (bool, error) {
	tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Txn(tctx).
		If(clientv3.Compare(clientv3.ModRevision(s.archiveMarkKey()), "=", m.mod)).
		Then(ops...).Commit()
	if err != nil {
		return false, s.fail(ctx, "writing the history archive", err)
	}
	return resp.Succeeded, nil
}

// PruneHistory deletes the archive's oldest batches whose newest record
// falls outside r (at the store's revision and now), until at least most
// records are deleted (most <= 0: MaxScan), in one etcd transaction, and
// returns how many records it deleted: a caller prunes in bounded batches
// until fewer than most are deleted. A batch is deleted whole, so up to a
// batch's records (archiveBatchBytes) older than r may be kept a while.
func (s *Store) PruneHistory(ctx context.Context, r store.Retention, now time.Time, most int) (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	if most <= 0 || most > store.MaxScan {
		most = store.MaxScan
	}
	at := uint64(s.snap.Load().rev)
	for attempt := 0; ; attempt++ {
		m, err := s.readMark(ctx)
		if err != nil {
			return 0, err
		}
		var ops []clientv3.Op
		n, size := 0, 0
		from := s.archiveBatchPrefix()
		end := clientv3.GetPrefixRangeEnd(from)
	read:
		for n < most && len(ops) < s.cfg.MaxTxnOps-2 {
			rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
			resp, err := s.cli.Get(rctx, from, clientv3.WithRange(end), clientv3.WithLimit(archiveReadPage))
			cancel()
			if err != nil {
				return 0, s.fail(ctx, "reading the history archive", err)
			}
			for _, kv := range resp.Kvs {
				var newest int64
				var tm time.Time
				count := 0
				if _, err := decodeBatch(kv.Value, func(rev int64, recs [][]byte) (bool, error) {
					newest, count = rev, count+len(recs)
					t, err := store.CommitTime(recs[len(recs)-1])
					tm = t
					return true, err
				}); err != nil {
					return 0, fmt.Errorf("%w (key %s)", err, kv.Key)
				}
				if !r.Prunes(uint64(newest), tm, at, now) || n >= most || len(ops) >= s.cfg.MaxTxnOps-2 {
					break read
				}
				ops = append(ops, clientv3.OpDelete(string(kv.Key)))
				n += count
				size += len(kv.Value)
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
		if len(ops) == 0 {
			return 0, nil
		}
		next := m
		next.records, next.bytes = max(m.records-int64(n), 0), max(m.bytes-int64(size), 0)
		ops = append(ops, clientv3.OpPut(s.archiveMarkKey(), next.encode()))
		ok, err := s.archiveTxn(ctx, m, ops)
		if err != nil {
			return 0, err
		}
		if ok {
			return n, nil
		}
		if attempt == 10 {
			return 0, fmt.Errorf("etcdstore: pruning the history: %w: the archive kept changing", store.ErrContention)
		}
	}
}
