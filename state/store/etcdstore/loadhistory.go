package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
)

// Carrying another store's history into an empty prefix (a migration's
// target, a restore): the records go into the archive under their own
// revisions, as the archiver would have written them, and the cluster's
// revision is moved past the newest (through) before the Load, so that
// every commit of this store is numbered after them. The revisions are
// the cluster's and cannot be set: a cluster behind through is moved on
// by puts of the archive's mark, one revision each (raiseRevision), which
// is what carrying costs when the source's numbers are ahead of the
// cluster's.

var _ store.HistoryLoader = (*Store)(nil)

// raiseWriters is how many puts raiseRevision keeps in flight.
const raiseWriters = 16

// LoadHistory implements store.HistoryLoader: before Load only, into an
// empty prefix whose archive is empty. The records go in batches as the
// archiver makes them (archiveBatchBytes, a revision never split), each
// with the mark in one etcd transaction that compares the mark's mod
// revision, the mark then naming through as archived (a revision whose
// records would take a transaction past half of MaxRequestBytes keeps
// them as store.ElideCommit does); then the cluster's
// revision is raised to through if it is behind. A failed LoadHistory
// may leave batches: DropHistory removes them.
func (s *Store) LoadHistory(ctx context.Context, through uint64, next func() (uint64, []byte, error)) (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("etcdstore: loading the history into %q: %w", s.prefix, err)
	}
	if n, err := s.countKeys(ctx, s.prefix); err != nil {
		return fail(err)
	} else if n > 0 {
		return fail(errors.New("the prefix is not empty"))
	}
	if n, err := s.countKeys(ctx, HistoryArchive+s.prefix); err != nil {
		return fail(err)
	} else if n > 0 {
		return fail(fmt.Errorf("its history archive (%s) is not empty", HistoryArchive+s.prefix))
	}
	var (
		m       mark // as written so far (mod: the mark's mod revision)
		batch   []byte
		records int64
		newest  uint64 // the newest revision in batch
		last    uint64 // the newest revision read
		n       int
		pending [][]byte // the records of revision last, not yet in batch
	)
	flush := func(final bool) error {
		next := mark{rev: newest, records: m.records + records, bytes: m.bytes + int64(len(batch))}
		if final {
			next.rev = max(next.rev, through)
		}
		var ops []clientv3.Op
		if len(batch) > 0 {
			ops = append(ops, opPut(s.archiveKey(int64(newest)), batch))
		}
		ops = append(ops, clientv3.OpPut(s.archiveMarkKey(), next.encode()))
		if len(batch)+128 > s.cfg.MaxRequestBytes {
			return fmt.Errorf("%w: the records of revision %d take %d bytes (MaxRequestBytes %d)", store.ErrTooLarge, newest, len(batch), s.cfg.MaxRequestBytes)
		}
		tctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Txn(tctx).
			If(clientv3.Compare(clientv3.ModRevision(s.archiveMarkKey()), "=", m.mod)).
			Then(ops...).Commit()
		cancel()
		if err != nil {
			return s.fail(ctx, "writing the history archive", err)
		}
		if !resp.Succeeded {
			return errors.New("another process wrote the history archive meanwhile")
		}
		next.mod = resp.Header.Revision
		m, batch, records = next, nil, 0
		return nil
	}
	// add moves revision last's records into the batch, closing the batch
	// first when they would take it past archiveBatchBytes.
	limit := min(archiveBatchBytes, s.cfg.MaxRequestBytes/2)
	add := func() error {
		size := 0
		for _, r := range pending {
			size += len(r) + 20
		}
		if size > limit {
			// Too large for a transaction: the keys written only, as a
			// commit of this size keeps on etcd.
			size = 0
			for i, r := range pending {
				c, err := store.DecodeCommit(last, r)
				if err != nil {
					return err
				}
				pending[i] = store.ElideCommit(c)
				size += len(pending[i]) + 20
			}
		}
		if len(batch) > 0 && len(batch)+size > limit {
			if err := flush(false); err != nil {
				return err
			}
		}
		for _, r := range pending {
			batch = appendArchived(batch, int64(last), r)
			records++
		}
		newest, pending = last, pending[:0]
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		rev, rec, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		switch {
		case rev == 0 || rev < last:
			return fail(fmt.Errorf("record of revision %d after revision %d", rev, last))
		case rev > through:
			return fail(fmt.Errorf("record of revision %d after the revision loaded, %d", rev, through))
		}
		if _, err := store.DecodeCommit(rev, rec); err != nil {
			return fail(fmt.Errorf("revision %d: %w", rev, err))
		}
		if rev != last && len(pending) > 0 {
			if err := add(); err != nil {
				return fail(err)
			}
		}
		last = rev
		pending = append(pending, rec)
		n++
	}
	if len(pending) > 0 {
		if err := add(); err != nil {
			return fail(err)
		}
	}
	if err := flush(true); err != nil {
		return fail(err)
	}
	if err := s.raiseRevision(ctx, int64(through), m.encode()); err != nil {
		return fail(err)
	}
	return n, nil
}

// raiseRevision puts the archive's mark (its value again, mark) until the
// cluster's revision is at least rev, raiseWriters puts at a time.
func (s *Store) raiseRevision(ctx context.Context, rev int64, mark string) error {
	var (
		wg      sync.WaitGroup
		reached atomic.Bool
		errOnce sync.Once
		first   error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range raiseWriters {
		wg.Add(1)
		go func() { // owned by raiseRevision, which waits for it
			defer wg.Done()
			for !reached.Load() && ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
				resp, err := s.cli.Put(pctx, s.archiveMarkKey(), mark)
				pcancel()
				if err != nil {
					errOnce.Do(func() { first = s.fail(ctx, "moving the cluster's revision on", err) })
					cancel()
					return
				}
				if resp.Header.Revision >= rev {
					reached.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// DropHistory removes the history archive of the prefix: after a
// LoadHistory whose Load failed and was undone, so that the next attempt
// finds it empty.
func (s *Store) DropHistory(ctx context.Context) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	dctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cli.Delete(dctx, HistoryArchive+s.prefix, clientv3.WithPrefix()); err != nil {
		return s.fail(ctx, "removing the history archive", err)
	}
	return nil
}

// ArchiveKeyCount returns how many keys the prefix's history archive
// holds (a migration's target must have none).
func (s *Store) ArchiveKeyCount(ctx context.Context) (int64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	return s.countKeys(ctx, HistoryArchive+s.prefix)
}

// countKeys counts the keys under prefix.
func (s *Store) countKeys(ctx context.Context, prefix string) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	resp, err := s.cli.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, s.fail(ctx, "counting keys", err)
	}
	return resp.Count, nil
}
