package boltstore

import (
	"context"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// Ephemeral keys on bbolt are ordinary keys, listed in the bucket
// "meta/ephemeral" while this process holds them: release and
// Close delete them, and Open deletes those a process that died left, so a
// key lives as long as the process that put it, as an etcd key under a
// lease does. Each put and removal is a commit of its own, with the change
// store.Store describes.

// ephemeralKey identifies one Ephemeral call's hold on its key: a later
// call for the same key takes it over, and the earlier release is then a
// no-op.
type ephemeralKey struct{ _ byte }

// Ephemeral stores val under key until release is called or the store is
// closed.
func (s *Store) Ephemeral(ctx context.Context, key string, val []byte) (func(), error) {
	if err := checkWrite(key, val); err != nil {
		return nil, err
	}
	v := make([]byte, len(val))
	copy(v, val)
	s.ephMu.Lock()
	defer s.ephMu.Unlock()
	s.mu.Lock()
	closing := s.closing || s.closed
	s.mu.Unlock()
	if closing {
		return nil, errClosed
	}
	_, err := s.update(ctx, func(t *txn) error {
		if err := t.Put(key, v); err != nil {
			return err
		}
		t.metaPut(ephemeralBucket, []byte(key), []byte{})
		t.Record(ephemeralChange(key, watcher.FieldCreated))
		return nil
	})
	if err != nil {
		return nil, err
	}
	tok := &ephemeralKey{}
	s.ephemeral[key] = tok
	var once sync.Once
	return func() { once.Do(func() { s.releaseEphemeral(key, tok) }) }, nil
}

func ephemeralChange(key, field string) watcher.Change {
	return watcher.Change{Kind: watcher.Kind(store.Kind(key)), ID: store.Rest(key), Fields: []string{field}}
}

// releaseEphemeral deletes key if tok still holds it.
func (s *Store) releaseEphemeral(key string, tok *ephemeralKey) {
	s.ephMu.Lock()
	defer s.ephMu.Unlock()
	if s.ephemeral[key] != tok {
		return // taken over by a later Ephemeral, or removed by Close
	}
	delete(s.ephemeral, key)
	// A store closing meanwhile refuses the write; Close, or the next
	// Open, deletes the key instead.
	_, _ = s.update(context.Background(), func(t *txn) error { return deleteEphemeral(t, key) })
}

func deleteEphemeral(t *txn, key string) error {
	if err := t.Delete(key); err != nil {
		return err
	}
	t.metaDelete(ephemeralBucket, []byte(key))
	t.Record(ephemeralChange(key, watcher.FieldRemoved))
	return nil
}

// releaseAllEphemeral deletes every key this process holds, in one commit
// (Close).
func (s *Store) releaseAllEphemeral() error {
	s.ephMu.Lock()
	defer s.ephMu.Unlock()
	if len(s.ephemeral) == 0 {
		return nil
	}
	keys := s.ephemeral
	s.ephemeral = map[string]*ephemeralKey{}
	_, err := s.update(context.Background(), func(t *txn) error {
		for key := range keys {
			if err := deleteEphemeral(t, key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("removing ephemeral keys: %w", err)
	}
	return nil
}

// dropEphemeral deletes, in the transaction that opens the file, the
// ephemeral keys a process that did not close the file left, at one new
// revision with their removal as its change set. It returns the revision.
// Nobody is watching yet: the change set is stored, not applied.
func dropEphemeral(tx *bolt.Tx, rev uint64) (uint64, error) {
	reg := tx.Bucket(ephemeralBucket)
	var keys []string
	if err := reg.ForEach(func(k, _ []byte) error {
		keys = append(keys, string(k))
		return nil
	}); err != nil {
		return 0, err
	}
	var changes []watcher.Change
	for _, key := range keys {
		if err := reg.Delete([]byte(key)); err != nil {
			return 0, err
		}
		kind, rest, err := split(key)
		if err != nil {
			continue
		}
		b := tx.Bucket([]byte(kind))
		if b == nil || b.Get([]byte(rest)) == nil {
			continue
		}
		if err := b.Delete([]byte(rest)); err != nil {
			return 0, err
		}
		changes = append(changes, ephemeralChange(key, watcher.FieldRemoved))
	}
	if len(changes) == 0 {
		return rev, nil
	}
	rev++
	if err := putChangeSet(tx, rev, changes, nil); err != nil {
		return 0, err
	}
	return rev, tx.Bucket(metaBucket).Put(keyRevision, u64(rev))
}

// Elect returns at once when no other caller of this process leads name:
// on bbolt the only process always leads. Callers in this process take
// turns: each waits until the one before resigns. The leading context is
// cancelled by resign and by Close.
func (s *Store) Elect(ctx context.Context, name string) (context.Context, func(), error) {
	if s.life.Err() != nil {
		return nil, nil, errClosed
	}
	s.electMu.Lock()
	tok, ok := s.elections[name]
	if !ok {
		tok = make(chan struct{}, 1)
		s.elections[name] = tok
	}
	s.electMu.Unlock()
	select {
	case tok <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-s.life.Done():
		return nil, nil, errClosed
	}
	leading, cancel := context.WithCancel(s.life)
	var once sync.Once
	return leading, func() {
		once.Do(func() {
			cancel()
			<-tok
		})
	}, nil
}
