package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
)

// Dump implements store.Dumper: the records of one revision (the latest,
// as a quorum sees it), read in pages at that revision, so writers go on
// meanwhile. The store's own keys and ephemeral keys (which belong to a
// live process, not to the controller's data) are left out. A dump that
// takes longer than etcd keeps history (its compaction) fails.
func (s *Store) Dump(ctx context.Context, fn func(key string, val []byte) error) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	end := clientv3.GetPrefixRangeEnd(s.prefix)
	from := s.prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(loadPage)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return 0, s.fail(ctx, "dump", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key[len(s.prefix):])
			if store.Kind(key) == store.MetaKind || kv.Lease != 0 {
				continue
			}
			if err := fn(key, kv.Value); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return uint64(rev), nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Load implements store.Loader: the records go in batches within
// MaxTxnOps and half of MaxRequestBytes. The first batch is committed only
// if the prefix holds nothing at all (a compare over the whole prefix),
// and marks the prefix as being loaded by this store; each later batch
// only while the mark is this store's, so two loads, or a load and a
// daemon initialising the controller, never mix. The mark goes with the
// last batch. Each batch is one revision with an empty change set.
func (s *Store) Load(ctx context.Context, next func() (string, []byte, error)) (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	mark := s.prefix + loadKey
	empty := encodeChanges(nil)
	var ops []clientv3.Op
	size, n, batches := 0, 0, 0
	flush := func(final bool) error {
		var cmp clientv3.Cmp
		if batches == 0 {
			cmp = clientv3.Compare(clientv3.CreateRevision(s.prefix), "=", 0).WithPrefix()
			if !final {
				ops = append(ops, clientv3.OpPut(mark, s.id))
			}
		} else {
			cmp = clientv3.Compare(clientv3.Value(mark), "=", s.id)
			if final {
				ops = append(ops, clientv3.OpDelete(mark))
			}
		}
		ops = append(ops, clientv3.OpPut(s.feedK, string(empty)))
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		resp, err := s.cli.Txn(rctx).If(cmp).Then(ops...).Commit()
		cancel()
		if err != nil {
			return s.fail(ctx, "load", err)
		}
		if !resp.Succeeded {
			if batches == 0 {
				return fmt.Errorf("etcdstore: load: the prefix %q is not empty: a store is loaded only into an empty prefix", s.prefix)
			}
			return fmt.Errorf("etcdstore: load: another process took over the prefix %q during the load", s.prefix)
		}
		batches++
		ops, size = ops[:0], 0
		return s.waitLocal(ctx, resp.Header.Revision)
	}
	for {
		key, val, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("etcdstore: load: reading the records: %w", err)
		}
		if err := store.CheckKey(key); err != nil {
			return n, err
		}
		sz := len(s.prefix) + len(key) + len(val) + 16
		if sz > s.cfg.MaxRequestBytes/2 {
			return n, fmt.Errorf("etcdstore: load: %w: record %s of %d bytes (MaxRequestBytes %d; etcd's --max-request-bytes)",
				store.ErrTooLarge, key, len(val), s.cfg.MaxRequestBytes)
		}
		if len(ops)+3 > s.cfg.MaxTxnOps || size+sz > s.cfg.MaxRequestBytes/2 {
			pending := len(ops)
			if err := flush(false); err != nil {
				return n, err
			}
			n += pending
		}
		ops = append(ops, clientv3.OpPut(s.prefix+key, string(val)))
		size += sz
	}
	if len(ops) > 0 || batches > 0 {
		pending := len(ops)
		if err := flush(true); err != nil {
			return n, err
		}
		n += pending
	}
	return n, nil
}
