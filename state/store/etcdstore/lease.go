package etcdstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/provisiond/provisiond/state/store"
	"github.com/provisiond/provisiond/watcher"
)

// ephemeral is a live Ephemeral key of this store.
type ephemeral struct {
	key string
	val []byte
}

// currentLease returns the store's lease, granting it and starting its
// keepalive if it has none (the first Ephemeral or Elect, or the first
// after the lease was lost).
func (s *Store) currentLease(ctx context.Context) (clientv3.LeaseID, <-chan struct{}, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.departed {
		return 0, nil, store.ErrClosed
	}
	if s.lease != clientv3.NoLease {
		return s.lease, s.leaseGen, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	ttl := int64((s.cfg.LeaseTTL + time.Second - 1) / time.Second)
	resp, err := s.cli.Grant(rctx, ttl)
	if err != nil {
		return 0, nil, s.fail(ctx, "granting the store's lease", err)
	}
	ka, err := s.cli.KeepAlive(s.ctx, resp.ID)
	if err != nil {
		return 0, nil, s.fail(ctx, "keeping the store's lease alive", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		// Close may have missed this lease: revoke it here.
		rctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		s.cli.Revoke(rctx, resp.ID)
		cancel()
		return 0, nil, store.ErrClosed
	}
	s.lease = resp.ID
	s.leaseGen = make(chan struct{})
	s.wg.Add(1)
	s.mu.Unlock()
	go s.keepLease(resp.ID, ka, s.leaseGen)
	return s.lease, s.leaseGen, nil
}

// keepLease drains the lease's keepalive responses. When they stop (the
// lease expired: etcd unreachable or this process paused for longer than
// its TTL), the store's ephemeral keys are gone and its leaderships over:
// it closes gen (ending the leading contexts) and puts the live ephemeral
// keys again under a new lease, retrying until it can or the store
// closes.
func (s *Store) keepLease(id clientv3.LeaseID, ka <-chan *clientv3.LeaseKeepAliveResponse, gen chan struct{}) {
	defer s.wg.Done()
	for range ka {
	}
	close(gen)
	if s.ctx.Err() != nil || s.hasDeparted() {
		return
	}
	s.stats.leaseLosses.Add(1)
	s.log.Warn("the store's etcd lease was lost: its ephemeral keys and leaderships are gone", "lease", fmt.Sprintf("%x", id))
	s.leaseMu.Lock()
	if s.lease == id {
		s.lease = clientv3.NoLease
	}
	s.leaseMu.Unlock()
	backoff := 100 * time.Millisecond
	for {
		err := s.reput()
		if err == nil {
			return
		}
		s.log.Warn("putting the ephemeral keys under a new lease", "err", err)
		if !s.pause(&backoff) {
			return
		}
	}
}

// reput puts every live ephemeral key under the current lease (granting
// one).
func (s *Store) reput() error {
	s.leaseMu.Lock()
	live := make([]*ephemeral, 0, len(s.ephems))
	for _, e := range s.ephems {
		live = append(live, e)
	}
	s.leaseMu.Unlock()
	if len(live) == 0 {
		return nil
	}
	lease, _, err := s.currentLease(s.ctx)
	if err != nil {
		return err
	}
	for _, e := range live {
		if _, err := s.putEphemeral(s.ctx, e, lease); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) putEphemeral(ctx context.Context, e *ephemeral, lease clientv3.LeaseID) (int64, error) {
	cs := encodeChanges([]watcher.Change{{
		Kind: watcher.Kind(store.Kind(e.key)), ID: store.Rest(e.key), Fields: []string{watcher.FieldCreated},
	}})
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	resp, err := s.cli.Txn(rctx).Then(
		clientv3.OpPut(s.prefix+e.key, string(e.val), clientv3.WithLease(lease)),
		clientv3.OpPut(s.feedK, string(cs)),
	).Commit()
	cancel()
	if err != nil {
		return 0, s.fail(ctx, "putting ephemeral key "+e.key, err)
	}
	rev := resp.Header.Revision
	if err := s.waitLocal(ctx, rev); err != nil {
		return 0, fmt.Errorf("etcdstore: %w: ephemeral key %s put at revision %d but not applied: %w", store.ErrUnavailable, e.key, rev, err)
	}
	return rev, nil
}

// Ephemeral implements store.Store: val is put under the store's lease,
// which the store keeps alive; if the lease is lost the store puts its
// live ephemeral keys again under a new one as soon as it can. A later
// Ephemeral of the same key takes it over: its value replaces the
// earlier one and the earlier release does nothing.
func (s *Store) Ephemeral(ctx context.Context, key string, val []byte) (func(), error) {
	if err := store.CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := s.fresh(); err != nil {
		return nil, err
	}
	lease, _, err := s.currentLease(ctx)
	if err != nil {
		return nil, err
	}
	e := &ephemeral{key: key, val: bytes.Clone(val)}
	s.ephPut.Lock()
	defer s.ephPut.Unlock()
	s.leaseMu.Lock()
	prev := s.ephems[key]
	s.ephems[key] = e // before the put: a lease lost meanwhile puts it again
	s.leaseMu.Unlock()
	if _, err := s.putEphemeral(ctx, e, lease); err != nil {
		s.leaseMu.Lock()
		if s.ephems[key] == e {
			if prev != nil {
				s.ephems[key] = prev // the key keeps the value etcd has
			} else {
				delete(s.ephems, key)
			}
		}
		s.leaseMu.Unlock()
		return nil, err
	}
	return sync.OnceFunc(func() { s.release(e) }), nil
}

// release removes an ephemeral key, if e still holds it (no later
// Ephemeral took it over) and it is still under this store's lease, and
// waits for the removal to be applied.
func (s *Store) release(e *ephemeral) {
	// Held to the end: an Ephemeral of the key made meanwhile is put
	// after this removal, not removed by it.
	s.ephPut.Lock()
	defer s.ephPut.Unlock()
	s.leaseMu.Lock()
	if s.ephems[e.key] != e {
		s.leaseMu.Unlock()
		return // taken over by a later Ephemeral of the key
	}
	delete(s.ephems, e.key)
	lease, departed := s.lease, s.departed
	s.leaseMu.Unlock()
	if departed {
		return // Depart revoked the lease, or tried to: the key goes with it
	}
	if s.enter() != nil {
		return // Close revokes the lease, which removes the key
	}
	defer s.leave()
	if lease == clientv3.NoLease {
		return // lost with its lease
	}
	cs := encodeChanges([]watcher.Change{{
		Kind: watcher.Kind(store.Kind(e.key)), ID: store.Rest(e.key), Fields: []string{watcher.FieldRemoved},
	}})
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
	defer cancel()
	k := s.prefix + e.key
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(k), "=", lease)).Then(
		clientv3.OpDelete(k),
		clientv3.OpPut(s.feedK, string(cs)),
	).Commit()
	if err != nil {
		s.log.Warn("releasing ephemeral key", "key", e.key, "err", err)
		return
	}
	if resp.Succeeded {
		s.waitLocal(ctx, resp.Header.Revision)
	}
}

// Depart implements store.Departer: the store's lease is revoked, in one
// request bounded by ctx and the request timeout, which removes every
// ephemeral key of this process and ends its leaderships at once, for
// every process watching. From then on no lease is granted: Ephemeral
// fails with ErrClosed, Elect waits for its context or Close as a
// campaign that cannot win, and releases, resigns and Close's own revoke
// do nothing (what they would remove went with the lease, or goes when it
// expires if the revoke did not reach etcd). Reads and Updates go on
// until Close. A second Depart does nothing.
func (s *Store) Depart(ctx context.Context) error {
	s.leaseMu.Lock()
	if s.departed {
		s.leaseMu.Unlock()
		return nil
	}
	s.departed = true
	lease := s.lease
	s.leaseMu.Unlock()
	if lease == clientv3.NoLease {
		return nil // none granted, or lost: no key of ours is left
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cli.Revoke(rctx, lease); err != nil {
		return fmt.Errorf("etcdstore: revoking the store's lease %x: %w (its keys go when it expires, within %s)",
			int64(lease), err, s.cfg.LeaseTTL)
	}
	return nil
}

// hasDeparted reports whether Depart was called.
func (s *Store) hasDeparted() bool {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	return s.departed
}

// Elect implements store.Store with go.etcd.io/etcd/client/v3/concurrency:
// a campaign under the store's lease, one campaigner per name in this
// process (so goroutines of one process take turns too).
func (s *Store) Elect(ctx context.Context, name string) (context.Context, func(), error) {
	if s.isClosed() {
		return nil, nil, store.ErrClosed
	}
	if name == "" || strings.Contains(name, "/") {
		// One election's keys must not fall under another's prefix.
		return nil, nil, fmt.Errorf("etcdstore: election name %q is empty or has a /", name)
	}
	// The campaign ends with ctx or Close (which does not wait for
	// campaigns).
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	defer context.AfterFunc(s.closeCtx, ccancel)()
	failed := func(err error) error {
		switch {
		case s.isClosed():
			return store.ErrClosed
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return err
	}
	if s.hasDeparted() {
		// A campaign that cannot win: no lease is granted after Depart.
		<-cctx.Done()
		return nil, nil, failed(cctx.Err())
	}

	s.mu.Lock()
	sem := s.elects[name]
	if sem == nil {
		sem = make(chan struct{}, 1)
		s.elects[name] = sem
	}
	s.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-cctx.Done():
		return nil, nil, failed(cctx.Err())
	}
	unlock := func() { <-sem }

	lease, gen, err := s.currentLease(cctx)
	if err != nil {
		unlock()
		return nil, nil, failed(err)
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(lease), concurrency.WithContext(s.ctx))
	if err != nil {
		unlock()
		return nil, nil, failed(s.fail(cctx, "election session", err))
	}
	el := concurrency.NewElection(sess, s.prefix+electPrefix+name+"/")
	if err := el.Campaign(cctx, s.id); err != nil {
		sess.Orphan()
		unlock()
		return nil, nil, failed(s.fail(cctx, "campaign "+name, err))
	}

	leading, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		sess.Orphan()
		unlock()
		return nil, nil, store.ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	// The leadership's monitor: it ends the leading context when the
	// session's lease goes, the store closes, or resign; then resigns
	// (unless the lease is gone, which removed the key) and lets the next
	// campaigner of this process in.
	go func() {
		defer s.wg.Done()
		defer close(done)
		select {
		case <-leading.Done():
		case <-sess.Done():
		case <-gen:
		case <-s.closing:
		}
		cancel()
		if s.ctx.Err() == nil && !s.hasDeparted() { // Depart's revoke took the key
			rctx, rcancel := context.WithTimeout(s.ctx, s.cfg.RequestTimeout)
			if err := el.Resign(rctx); err != nil && !errors.Is(err, context.Canceled) {
				s.log.Warn("resigning election", "name", name, "err", err)
			}
			rcancel()
		}
		sess.Orphan()
		unlock()
	}()
	resign := func() {
		cancel()
		<-done
	}
	return leading, resign, nil
}
